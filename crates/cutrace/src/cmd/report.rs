//! `cutrace report` (being written).

/// (not yet implemented)
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("cutrace report is not implemented yet")
}
