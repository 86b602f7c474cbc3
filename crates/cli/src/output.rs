//! Everything the CLI prints, in one place: errors, warnings, tables and logging setup.
#![expect(
    clippy::print_stderr,
    clippy::print_stdout,
    reason = "the CLI's output module is where printing happens"
)]

use std::io::Write;

use tracing_subscriber::EnvFilter;

/// Sets up logging to stderr: `FORGE_LOG` wins, then `-v` flags, then warnings only.
pub(crate) fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("FORGE_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Prints an error and its causes: `error: what failed` then `  caused by: …` lines.
pub(crate) fn error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

pub(crate) fn warning(message: &str) {
    eprintln!("warning: {message}");
}

/// A line for people on stderr, which keeps stdout for the command's own output.
pub(crate) fn note(message: &str) {
    eprintln!("{message}");
}

/// Writes raw bytes to stdout or stderr and flushes, for streamed command output.
pub(crate) fn raw(stderr: bool, data: &[u8]) -> std::io::Result<()> {
    if stderr {
        let mut err = std::io::stderr().lock();
        err.write_all(data)?;
        err.flush()
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(data)?;
        out.flush()
    }
}

/// A line on stdout (reports, tables).
pub(crate) fn line(text: &str) {
    println!("{text}");
}

/// A table on stdout: a header row, then the rows, columns padded to their widest cell.
pub(crate) fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    use std::fmt::Write as _;
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ");
            }
        }
        line.trim_end().to_owned()
    };
    println!("{}", render(header.to_vec()));
    for row in rows {
        println!("{}", render(row.iter().map(String::as_str).collect()));
    }
}
