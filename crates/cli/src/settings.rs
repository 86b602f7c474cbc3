//! Resolving settings the command line leaves open: the data directory, the config file
//! and what it says about registries.

use std::path::{Path, PathBuf};

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

/// The config file: the flag, `FORGE_CONFIG`, or the first of the default places that
/// exists (`/etc/forge/config.toml` for root, `~/.config/forge/config.toml` otherwise).
pub(crate) fn config_file(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(file) = flag {
        return Some(file.to_owned());
    }
    if let Some(file) = std::env::var_os(forge_server::config::ENV_CONFIG) {
        return Some(PathBuf::from(file));
    }
    let default = if rustix::process::geteuid().is_root() {
        PathBuf::from("/etc/forge/config.toml")
    } else {
        PathBuf::from(std::env::var_os("HOME")?).join(".config/forge/config.toml")
    };
    default.is_file().then_some(default)
}

/// Registries, mirrors and credentials from the config file (the `[images]` table that
/// `forge serve` reads too), so that the CLI pulls the way the server does.
pub(crate) fn registries(flag: Option<&Path>) -> anyhow::Result<forge_image::RegistryConfig> {
    let file = config_file(flag);
    let env = |name: &str| std::env::var(name).ok();
    let config = forge_server::config::load(
        file.as_deref(),
        &env,
        &forge_server::config::Overrides::default(),
        PathBuf::from("/"),
    )?;
    Ok(config.registries)
}
