//! Resolving settings the command line leaves open (the data directory).

use std::path::PathBuf;

use anyhow::Context;

use crate::cli::DataDirArg;

/// The data directory: the flag or `FORGE_DATA_DIR`, else `/var/lib/forge` for root and
/// `$XDG_DATA_HOME/forge` (or `~/.local/share/forge`) for anyone else.
pub(crate) fn data_dir(arg: &DataDirArg) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &arg.data_dir {
        return std::path::absolute(dir)
            .with_context(|| format!("invalid data directory {}", dir.display()));
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/forge"));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("forge"));
    }
    let home = std::env::var_os("HOME")
        .context("HOME is not set; pass --data-dir or set FORGE_DATA_DIR")?;
    Ok(PathBuf::from(home).join(".local/share/forge"))
}
