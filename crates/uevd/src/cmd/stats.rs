//! `uevd stats`: boot phases over several boots, one group or several side
//! by side.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use uevd_report::run::{default_group, Run};
use uevd_report::table::{self, Format, Group};

/// Shown after both the short and the long help.
macro_rules! examples {
    () => {
        "Examples:\n  \
uevd stats lab/out/bench-disks-n100-uevd-r*\n  \
uevd stats --compare lab/out/bench-disks-n100-udevd-r* lab/out/bench-disks-n100-uevd-r*\n  \
uevd stats --compare old=a.jsonl,b.jsonl new=c.jsonl,d.jsonl\n  \
uevd stats --compare --group udevd lab/out/*-udevd-r1 --group uevd lab/out/*-uevd-r1\n  \
uevd stats --format csv lab/out/bench-*-uevd-r*"
    };
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = examples!(),
    after_long_help = concat!(
        "Statistics of boot phases over several boots.\n\n\
Each RUN is one boot: a timeline journal (.jsonl or the lab's timeline.txt), a lab run \
directory (lab/out/<run>/: its result.json, timeline.txt and dmesg.txt, whichever exist), \
its result.json, or a kernel log.\n\n\
Phases, in seconds:\n  \
kernel (boot to /init)     result.json's boot_s, else the log's `Run /init`\n  \
initramfs unpacking        `Trying to unpack rootfs` to `Freeing initrd memory` (log)\n  \
trigger (to last arrival)  the trigger (first event `uevd trigger` made, else the first \
event) to the last event's arrival\n  \
event processing           first arrival to last finish\n  \
settle (request to done)   time settles waited (every settle-request to its settle-done)\n  \
trigger to settled         the trigger to the last settle-done\n  \
module loading             sum of the journal's module loads\n  \
module init (dmesg)        sum of the log's module initcalls\n  \
lab wall_s, lab cpu_s      the lab's measured phase and its CPU time\n  \
subsystem NAME             sum of the processing time (finished - started) of its events\n  \
program NAME               sum of the run time of that external program\n\n\
A table of every event of the boots follows (not with --compare, csv or json): its \
latency from arrival to processed, the wait in the queue and its own processing, with \
the same statistics over the events.\n\n\
For each: n (boots that have it), mean, median, mode, stddev, min and max. The mode is \
the most common bin of values: the bin width is shown (default: a tenth of the median's \
order of magnitude, e.g. 0.1 s for 2.5 s; --bin sets it), the bin is given by its lower \
edge, * marks a tie (the lowest of the tied bins is shown) and - means no two boots share \
a bin. stddev is the sample standard deviation (n-1 in the denominator), - for a single \
boot.\n\n\
Groups: NAME=RUN,RUN,... as an argument, or --group NAME RUN... (repeatable). With \
--compare, groups are shown side by side, each against the first: the change of the mean \
and median, in seconds and percent, and \"within noise\" when the difference of means is \
smaller than the combined standard error sqrt(sd_a^2/n_a + sd_b^2/n_b) (with a single \
boot on a side the noise is unknown). RUNs given outside a group are grouped by name \
without a trailing -rN (bench-disks-n100-uevd-r2 goes to bench-disks-n100-uevd) with \
--compare, and all together without. Without --compare, each group gets its own table.",
        "\n\n",
        examples!()
    )
)]
pub struct Options {
    /// Boots to measure (journals or lab run directories); NAME=RUN,RUN,...
    /// makes a group. Default: the running system's journal.
    #[arg(value_name = "RUN")]
    runs: Vec<String>,
    #[command(flatten)]
    group: GroupArgs,
    /// Show groups side by side, with the change against the first.
    #[arg(long)]
    compare: bool,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
    format: String,
    /// Width of the mode's bins, in seconds.
    #[arg(long, value_name = "SECONDS")]
    bin: Option<f64>,
    /// Subsystems and programs to show in a table, the largest first (0:
    /// all); csv and json always have all.
    #[arg(long, value_name = "N", default_value_t = 12)]
    top: usize,
}

/// `--group NAME RUN...`, kept apart per occurrence (the derive would
/// flatten them into one list).
#[derive(Debug, Default)]
struct GroupArgs(Vec<Vec<String>>);

impl clap::FromArgMatches for GroupArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(GroupArgs(
            m.get_occurrences::<String>("group")
                .map(|occ| occ.map(|o| o.cloned().collect()).collect())
                .unwrap_or_default(),
        ))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = GroupArgs::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for GroupArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.arg(
            clap::Arg::new("group")
                .long("group")
                .num_args(2..)
                .value_names(["NAME", "RUN"])
                .action(clap::ArgAction::Append)
                .help(
                    "A group: its name, then its runs, up to the next option (repeat for more \
                     groups)",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        GroupArgs::augment_args(cmd)
    }
}

fn load(path: &str) -> io::Result<Run> {
    Run::load(Path::new(path)).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// NAME=RUN,... unless it names an existing file (paths may hold '=').
fn as_group(arg: &str) -> Option<(&str, &str)> {
    let (name, runs) = arg.split_once('=')?;
    (!name.is_empty() && !name.contains('/') && !Path::new(arg).exists()).then_some((name, runs))
}

fn add(groups: &mut Vec<Group>, name: &str, run: Run) {
    match groups.iter_mut().find(|g| g.name == name) {
        Some(g) => g.runs.push(run),
        None => groups.push(Group {
            name: name.to_string(),
            runs: vec![run],
        }),
    }
}

pub fn run(mut opts: Options) -> io::Result<ExitCode> {
    if opts.runs.is_empty() && opts.group.0.is_empty() {
        opts.runs.push(super::RUNNING_JOURNAL.to_string());
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut loose: Vec<Run> = Vec::new();
    for arg in &opts.runs {
        match as_group(arg) {
            Some((name, runs)) => {
                for r in runs.split(',').filter(|r| !r.is_empty()) {
                    add(&mut groups, name, load(r)?);
                }
            }
            None => loose.push(load(arg)?),
        }
    }
    for g in &opts.group.0 {
        let (name, runs) = g.split_first().expect("clap asks for a name and a run");
        for r in runs {
            add(&mut groups, name, load(r)?);
        }
    }
    let explicit = !groups.is_empty();
    for r in loose {
        let name = if opts.compare {
            default_group(&r.name).to_string()
        } else if !explicit {
            "all".to_string()
        } else {
            "other".to_string()
        };
        add(&mut groups, &name, r);
    }
    if groups.is_empty() {
        log::error!("no runs given (see uevd stats --help)");
        return Ok(ExitCode::from(2));
    }
    let format = match opts.format.as_str() {
        "csv" => Format::Csv,
        "json" => Format::Json,
        _ => Format::Table,
    };
    let bin = match opts.bin {
        Some(b) if !(b > 0.0 && b.is_finite()) => {
            log::error!("--bin must be a positive number of seconds");
            return Ok(ExitCode::from(2));
        }
        b => b,
    };
    let mut out = io::stdout().lock();
    if opts.compare || format != Format::Table {
        if opts.compare && groups.len() < 2 {
            log::warn!(
                "only one group ({}): nothing to compare it with",
                groups[0].name
            );
        }
        let text = table::render(
            &groups,
            &table::Options {
                format,
                compare: opts.compare,
                bin,
                top: opts.top,
            },
        );
        out.write_all(text.as_bytes())?;
    } else {
        for (i, g) in groups.iter().enumerate() {
            if i > 0 {
                out.write_all(b"\n")?;
            }
            if groups.len() > 1 {
                writeln!(out, "== {}", g.name)?;
            }
            let text = table::render(
                std::slice::from_ref(g),
                &table::Options {
                    format,
                    compare: false,
                    bin,
                    top: opts.top,
                },
            );
            out.write_all(text.as_bytes())?;
            let events = table::per_event(g);
            if !events.is_empty() {
                writeln!(out)?;
                out.write_all(events.as_bytes())?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
