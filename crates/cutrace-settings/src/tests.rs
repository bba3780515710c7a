use proptest::prelude::*;

use std::ffi::OsStr;

use super::*;

/// The value of `var` in `env` as `std::env::var_os` gives it (the last one set).
fn lookup<'a>(env: &'a [(&str, OsString)], var: &str) -> Option<&'a OsStr> {
    env.iter()
        .rev()
        .find(|(k, _)| *k == var)
        .map(|(_, v)| v.as_os_str())
}

/// A list item as the encoding carries it: no commas, no surrounding blanks, not empty.
fn item() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.:#|()*+-][A-Za-z0-9_.:#|()*+ -]{0,12}[A-Za-z0-9_.]|[A-Za-z0-9_.]"
}

fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{1,40}"
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        opt(proptest::collection::vec(any::<u32>(), 1..5)),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        any::<(bool, bool, bool)>(),
        opt(any::<u64>()),
    )
        .prop_map(
            |(cbids, dev, max, pre, exit, flush, (sub, hook, timing), keep)| Knobs {
                runtime_cbids: cbids,
                device_buffer_bytes: dev,
                max_buffers: max,
                prealloc_buffers: pre,
                exit_deadline_ms: exit,
                flush_period_ms: flush,
                subscribe: sub,
                bench_hook: hook,
                counters_timing: timing,
                counters_keep_images: keep,
            },
        )
}

fn settings() -> impl Strategy<Value = Settings> {
    let counters = opt((
        proptest::collection::vec(item(), 1..4),
        opt(text()),
        opt(any::<u64>()),
        opt(any::<u64>()),
    )
        .prop_map(|(metrics, kernels, max_kernels, every)| Counters {
            metrics,
            kernels,
            max_kernels,
            every,
        }));
    let pm = opt((
        proptest::collection::vec(item(), 1..4),
        opt(any::<u64>()),
        opt(proptest::collection::vec(any::<u32>(), 1..4)),
        proptest::collection::vec(item(), 0..3),
    )
        .prop_map(|(metrics, interval_ns, devices, optional)| PmSampling {
            metrics,
            interval_ns,
            devices,
            optional,
        }));
    let pc = opt(opt(any::<u32>()).prop_map(|period| PcSampling { period }));
    let access =
        (any::<bool>(), opt(text()), opt(text())).prop_map(|(require, a, h)| CounterAccess {
            require,
            access_hint: a,
            holders_hint: h,
        });
    (
        (
            opt("/[^\u{0}]{0,30}"),
            opt(proptest::collection::vec(item(), 1..6)),
            opt(text()),
            opt(any::<u64>()),
            opt(proptest::sample::select(ApiMode::ALL.to_vec())),
            any::<(bool, bool, bool)>(),
            opt("/[^\u{0}]{0,30}"),
        ),
        knobs(),
        counters,
        (pm, pc),
        access,
        (
            opt(
                (1u64..1_000_000, 1u64..1_000_000).prop_map(|(on, extra)| Duty {
                    on_ms: on,
                    period_ms: on + extra,
                }),
            ),
            opt(any::<u32>()),
            opt(any::<u64>()),
        ),
    )
        .prop_map(
            |(
                (dir, kinds, run_id, buffer, api, (ser, cmd, disc), monitor),
                knobs,
                counters,
                (pm, pc),
                access,
                (duty, uid, stuck),
            )| {
                Settings {
                    output_dir: dir.map(PathBuf::from),
                    kinds,
                    run_id,
                    buffer_bytes: buffer,
                    api,
                    serialize_kernels: ser,
                    record_cmdline: cmd,
                    discard: disc,
                    monitor_socket: monitor.map(PathBuf::from),
                    monitor_duty: duty,
                    monitor_uid: uid,
                    monitor_stuck_after_s: stuck,
                    knobs,
                    counters,
                    pm_sampling: pm,
                    pc_sampling: pc,
                    counter_access: access,
                }
            },
        )
}

fn read(env: &[(&'static str, OsString)]) -> (Settings, Vec<Problem>) {
    Settings::from_env(&|k| lookup(env, k).map(OsStr::to_owned))
}

#[test]
fn duty_cycles_read_as_users_write_them() {
    let d = |on, period| {
        Some(Duty {
            on_ms: on,
            period_ms: period,
        })
    };
    assert_eq!(Duty::parse("2s/20s"), d(2_000, 20_000));
    assert_eq!(Duty::parse("500ms/10s"), d(500, 10_000));
    assert_eq!(Duty::parse(" 2000 / 20000 "), d(2_000, 20_000));
    for bad in [
        "",
        "2s",
        "20s/2s",
        "0/10",
        "5s/5s",
        "x/10",
        "1s/99999999999999999999s",
    ] {
        assert_eq!(Duty::parse(bad), None, "{bad}");
    }
}

proptest! {
    #[test]
    fn every_setting_survives_the_environment(s in settings()) {
        let env = s.to_env();
        // Each variable once, and only the library's own.
        let mut names: Vec<&str> = env.iter().map(|(k, _)| *k).collect();
        names.sort_unstable();
        names.dedup();
        prop_assert_eq!(names.len(), env.len());
        prop_assert!(names.iter().all(|n| var::INJECTION.contains(n)), "{:?}", names);
        let (back, problems) = read(&env);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        prop_assert_eq!(back, s);
    }
}

#[test]
fn the_defaults_write_nothing_and_an_empty_environment_reads_as_them() {
    assert!(Settings::default().to_env().is_empty());
    let (s, problems) = read(&[]);
    assert_eq!(s, Settings::default());
    assert!(problems.is_empty());
    assert!(s.knobs.subscribe);
    assert_eq!(default_kinds().len(), KINDS.len() - OPT_IN_KINDS.len());
    assert!(!default_kinds().iter().any(|k| k == "memory"));
}

#[test]
fn what_does_not_parse_is_unset_and_named() {
    use std::os::unix::ffi::OsStringExt;
    let env = [
        (var::BUFFER_BYTES, OsString::from("8M")),
        (var::API, OsString::from("few")),
        (var::PM_DEVICES, OsString::from("0,x")),
        (var::RUN_ID, OsString::from_vec(vec![b'r', 0xff])),
        (var::COUNTERS, OsString::from(" , ,")),
        (var::PM_METRICS, OsString::from("a.sum, b.avg ,")),
    ];
    let (s, problems) = read(&env);
    assert_eq!(s.buffer_bytes, None);
    assert_eq!(s.api, None);
    assert_eq!(s.run_id, None);
    // A list of no names asks for nothing.
    assert_eq!(s.counters, None);
    let pm = s.pm_sampling.unwrap();
    assert_eq!(pm.metrics, ["a.sum", "b.avg"]);
    assert_eq!(pm.devices, None);
    let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            format!("{}=\"0,x\" is not a list of numbers", var::PM_DEVICES),
            format!("{}=\"r\u{fffd}\" is not UTF-8 text", var::RUN_ID),
            format!("{}=\"8M\" is not a number", var::BUFFER_BYTES),
            format!("{}=\"few\" is not one of all, lean, launches", var::API),
        ]
    );
}

#[test]
fn a_counter_run_is_told_by_its_metric_list() {
    let entry = |var: &str, value: &str| format!("{var}={value}").into_bytes();
    assert_eq!(
        counter_run(&entry(var::COUNTERS, "sm__ctas_launched.sum")),
        Some(CounterRun::Profile)
    );
    assert_eq!(
        counter_run(&entry(var::PM_METRICS, "x")),
        Some(CounterRun::Sample)
    );
    assert_eq!(counter_run(&entry(var::COUNTERS, "")), None);
    assert_eq!(counter_run(&entry(var::COUNTERS_EVERY, "2")), None);
    assert_eq!(counter_run(&entry(var::OUTPUT_DIR, "/t")), None);
}
