//! Every subcommand's `--help` teaches with examples (the README promises it), and the examples
//! name only flags that the subcommand accepts.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?} --help failed");
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn every_subcommand_has_examples_that_use_real_flags() {
    for sub in [
        "report", "diff", "record", "profile", "doctor", "audit", "dcgm", "monitor", "agent",
    ] {
        let text = help(&[sub]);
        let ex = text
            .split("Examples:")
            .nth(1)
            .unwrap_or_else(|| panic!("`cutrace {sub} --help` has no Examples section:\n{text}"));
        let flags_known = text.split("Examples:").next().unwrap().to_owned()
            // dcgm's flags live on its subcommands.
            + &if sub == "dcgm" {
                help(&["dcgm", "run"]) + &help(&["dcgm", "pause"])
            } else {
                String::new()
            };
        for line in ex
            .lines()
            .filter(|l| l.trim_start().starts_with("cutrace "))
        {
            // Flags of cutrace itself, up to a `--` that starts the traced program or a pipe.
            let ours = line
                .split(" -- ")
                .next()
                .unwrap()
                .split('|')
                .next()
                .unwrap();
            for word in ours.split_whitespace().filter(|w| w.starts_with("--")) {
                assert!(
                    flags_known.contains(&format!("{word} "))
                        || flags_known.contains(&format!("{word}\n")),
                    "`cutrace {sub}` example uses {word}, which its --help does not list: {line}"
                );
            }
        }
    }
}
