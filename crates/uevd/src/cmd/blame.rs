//! `uevd blame`: the slowest events, subsystems, builtins, rule lines,
//! programs and modules of a journal.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_report::blame::{self, SortBy};
use uevd_report::{run, Journal};

/// Shown after both the short and the long help.
macro_rules! examples {
    () => {
        "Examples:\n  \
uevd blame\n  \
uevd blame --sort wait -n 5 lab/out/disks-n100-uevd\n  \
uevd blame --format json lab/out/boot-n100-uevd"
    };
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = examples!(),
    after_long_help = concat!(
        "Where the time of a boot's events went, slowest first, from uevd's \
timeline journal.\n\n\
For each of the slowest events: its total time (finished - arrived), how long it waited \
in the queue (started - arrived: for a free worker, or for an earlier event of the same \
device, a parent or a child), how long a worker processed it (finished - started), and \
each step of that processing (device, rules, node, links, db, broadcast, programs... and \
any time between steps). Then per subsystem (events, processing total, mean and max, \
mean wait in the queue, share of all processing), every step name's share of all processing, \
how the rules step divides into builtins, forked programs and the rest, every builtin run \
in-process (runs, total, mean, max, share; via import = IMPORT{builtin}, program = PROGRAM or \
IMPORT{program} answered in-process, run = RUN{builtin}), the slowest rule lines (file:line; \
the daemon records a line when its evaluation took 50us or more, at most 8 per event), \
programs (steps named program:NAME) and module loads.\n\n\
--format json prints the same as one JSON document, times in nanoseconds and shares as \
fractions; -n bounds its slowest events only.",
        "\n\n",
        examples!()
    )
)]
pub struct Options {
    /// The timeline journal, or a lab run directory holding timeline.txt.
    #[arg(value_name = "JOURNAL", default_value = super::RUNNING_JOURNAL)]
    journal: PathBuf,
    /// How many events (and subsystems, programs, modules) to list; 0 for
    /// all.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    /// Order of the slowest events: by processing, by wait in the queue, or
    /// by total (wait + processing).
    #[arg(long, default_value = "processing", value_parser = ["processing", "wait", "total"])]
    sort: String,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
}

pub fn run(opts: Options) -> io::Result<ExitCode> {
    let journal = Journal::load(&run::journal_path(&opts.journal))?;
    let by = match opts.sort.as_str() {
        "wait" => SortBy::Wait,
        "total" => SortBy::Total,
        _ => SortBy::Processing,
    };
    let mut out = io::stdout().lock();
    let text = match opts.format.as_str() {
        "json" => blame::json(&journal, by, opts.limit),
        _ => blame::report(&journal, by, opts.limit),
    };
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
