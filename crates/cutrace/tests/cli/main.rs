//! The CLI's integration tests, one binary: each module runs the `cutrace` binary cargo built for
//! one area. Helpers come from `util` (the binary) and cutrace-testkit (fixtures, temporary
//! directories, records, skip notes).

mod util;

mod architecture_deps_doc;
mod audit_cli;
mod chrome_export;
mod comm_rules_cli;
mod convert_outputs;
mod counters_fixture;
mod counters_report;
mod critical_path_cli;
mod dcgm_cli;
mod dcgm_hang_cli;
mod diff_cli;
mod doctor_cli;
mod doctor_h200;
mod fuzz_cli;
mod gpu_record;
mod help_cli;
mod hostile_admin;
mod hostile_inputs;
mod hostile_outputs;
mod hta_critical_path;
mod hta_peer;
mod input_cli;
mod job_cli;
mod job_convert;
mod job_diff_cli;
mod job_html_cli;
mod kineto_oracle;
mod launch_loss_cli;
mod memory_oracle;
mod mistakes_cli;
mod monitor_cli;
mod monitor_prometheus;
mod multiproc_report;
mod notes_cli;
mod output_errors;
mod output_safety;
mod parquet_export;
mod parquet_job;
mod parts_cli;
mod path_html_cli;
mod pc_fixture;
mod perfetto_export;
mod profile_cli;
mod rank_names_cli;
mod record_cli;
mod record_memory;
mod report_cli;
mod report_schema_doc;
mod report_text_cli;
mod rocm_report_cli;
mod sample_fixture;
mod steps_cli;
