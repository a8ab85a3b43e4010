//! Writes uevd's man pages and shell completions from the same clap
//! definition the binary parses, so that they cannot drift from it. A
//! program of its own: uevd itself does not carry the generators.
//!
//! `uevd-gen DIR` writes DIR/man1/*.1 and DIR/completions/{uevd.bash,
//! _uevd, uevd.fish}.

// The command tree is uevd's own main.rs, compiled here as a module; its
// `main` and the commands' bodies are unused in this program.
#[allow(dead_code, unused_imports)]
#[path = "../main.rs"]
mod uevd;

// What uevd's modules name through `crate::` (Cli: in their tests, which
// `clippy --all-targets` compiles here too).
#[allow(unused_imports)]
use uevd::{parse_level, Cli, Roots};

use clap::CommandFactory;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir] = args.as_slice() else {
        eprintln!("usage: uevd-gen DIR   (writes DIR/man1 and DIR/completions)");
        return ExitCode::from(2);
    };
    match generate(&PathBuf::from(dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uevd-gen: {e}");
            ExitCode::from(1)
        }
    }
}

fn generate(dir: &std::path::Path) -> std::io::Result<()> {
    let man = dir.join("man1");
    std::fs::create_dir_all(&man)?;
    clap_mangen::generate_to(Cli::command(), &man)?;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    use clap_complete::Shell;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut Cli::command(), "uevd", &completions)?;
    }
    Ok(())
}
