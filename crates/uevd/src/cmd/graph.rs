//! `uevd graph`: the boot as one HTML page with an SVG timeline.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_report::{graph, run, Journal};

/// Shown after both the short and the long help.
macro_rules! examples {
    () => {
        "Examples:\n  \
uevd graph -o boot.html /run/uevd/timeline.jsonl\n  \
dmesg | uevd graph --dmesg - -o boot.html /run/uevd/timeline.jsonl\n  \
uevd graph -o boot.html lab/out/boot-n100-uevd      (its timeline.txt and dmesg.txt)"
    };
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = examples!(),
    after_long_help = concat!(
        "Draws the boot as one self-contained HTML page (inline SVG, a little inline \
script for zooming; nothing is fetched from anywhere).\n\n\
On one time axis, in seconds since boot (CLOCK_BOOTTIME, the clock of the kernel's log): \
the kernel's initcalls by task (from a log taken with `initcall_debug printk.time=1`), \
initramfs unpacking and `Run /init`; each uevd worker's events as bars labelled with \
their devpath and coloured by subsystem, the external programs they ran in a strip \
beneath, module loads in their own rows; the trigger (the first event `uevd trigger` \
made), every settle request and the answer to the last one. The critical path, the \
chain of events the last settle waited for (each started when an earlier event for the \
same device, a parent or a child finished), is outlined in red, with its waiting in the \
queue dashed.\n\n\
Hovering a bar shows what it was; a click prints its details, steps included, below \
the graph. Bars narrower than a pixel are drawn merged with their neighbours and come \
apart when zoomed in (Ctrl+wheel, the + and - buttons or keys; Shift+wheel, the arrow \
keys or dragging on the time axis pan). A URL ending in #t=START,END opens on that \
window, in seconds since boot.",
        "\n\n",
        examples!()
    )
)]
pub struct Options {
    /// The timeline journal (see `uevd daemon --timeline`), or a lab run
    /// directory holding timeline.txt and dmesg.txt. Default: the running
    /// system's journal, with the kernel's log from /dev/kmsg.
    #[arg(value_name = "JOURNAL", default_value = super::RUNNING_JOURNAL)]
    journal: PathBuf,
    /// The kernel's log, for the initcalls and the initramfs ("-": standard
    /// input). Default: dmesg.txt beside the journal, if there is one, else
    /// for the running system's journal the kernel's own (/dev/kmsg).
    #[arg(long, value_name = "FILE")]
    dmesg: Option<PathBuf>,
    /// Where to write the page ("-": standard output, which must not be a
    /// terminal).
    #[arg(short, long, value_name = "FILE", default_value = "-")]
    output: PathBuf,
    /// Width of the time axis in pixels when the whole boot is shown.
    #[arg(long, value_name = "PIXELS", default_value_t = 1600)]
    width: u32,
    /// The page's title.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
}

pub fn run(opts: Options) -> io::Result<ExitCode> {
    let dir = opts.journal.is_dir().then(|| opts.journal.clone());
    let journal_path = run::journal_path(&opts.journal);
    // A lab run of another manager has a kernel log but no journal: the
    // kernel side alone is still worth drawing.
    let journal = if dir.is_some() && !journal_path.exists() {
        None
    } else {
        Some(Journal::load(&journal_path)?)
    };
    let dmesg_path = opts.dmesg.clone().or_else(|| {
        let beside = match &dir {
            Some(d) => d.join("dmesg.txt"),
            None => journal_path.parent()?.join("dmesg.txt"),
        };
        beside.exists().then_some(beside)
    });
    // This boot's own journal: its kernel log is the running kernel's.
    let dmesg_path = dmesg_path.or_else(|| {
        (opts.journal.as_os_str() == super::RUNNING_JOURNAL).then(|| PathBuf::from("/dev/kmsg"))
    });
    let dmesg = match &dmesg_path {
        Some(p) => Some(
            run::read_dmesg(p)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?,
        ),
        None => None,
    };
    if journal.is_none() && dmesg.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no timeline journal or dmesg.txt",
                opts.journal.display()
            ),
        ));
    }
    let title = opts.title.unwrap_or_else(|| {
        let name = dir
            .as_ref()
            .and_then(|d| std::fs::canonicalize(d).ok())
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| journal_path.display().to_string());
        format!("Boot timeline: {name}")
    });
    let (html, sum) = graph::render(
        journal.as_ref(),
        dmesg.as_ref(),
        &graph::Options {
            width: opts.width,
            title,
        },
    );
    if opts.output.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        if out.is_terminal() {
            log::error!("the graph is an HTML page: give -o FILE or redirect standard output");
            return Ok(ExitCode::from(2));
        }
        out.write_all(html.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(&opts.output, &html)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", opts.output.display())))?;
        eprintln!(
            "{}: {} events, {} initcalls in {} rows; {} bars drawn; critical path of {} events",
            opts.output.display(),
            sum.events,
            sum.initcalls,
            sum.lanes,
            sum.rects,
            sum.critical
        );
    }
    Ok(ExitCode::SUCCESS)
}
