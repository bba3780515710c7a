//! `cutrace record` (being written).

/// (not yet implemented)
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("cutrace record is not implemented yet")
}
