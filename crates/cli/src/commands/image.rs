//! `forge image …`: the image store in the data directory, used directly (a running server
//! shares it): list, pull, import, build, remove, prune.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use forge_image::{DebianBuild, Image, ImageStore, Progress, ProgressEvent};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::cli::{ImageArgs, ImageBuildArgs, ImageCommand, ImageImportArgs};
use crate::output;

pub(crate) async fn run(command: ImageCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImageCommand::Ls { store, json } => ls(&store, json),
        ImageCommand::Pull {
            store,
            reference,
            platform,
        } => pull(&store, &reference, platform).await,
        ImageCommand::Import(args) => import(args).await,
        ImageCommand::Build(args) => build(args).await,
        ImageCommand::Rm {
            store,
            names,
            force,
        } => rm(&store, &names, force),
        ImageCommand::Prune { store } => prune(&store),
    }
}

/// Opens the store in the data directory, with the config file's registry settings.
fn open(args: &ImageArgs) -> anyhow::Result<ImageStore> {
    let data_dir = crate::settings::data_dir(&args.data)?;
    let registries = crate::settings::registries(args.config.as_deref())?;
    ImageStore::open(data_dir.join("images"), registries)
        .with_context(|| format!("cannot open the image store in {}", data_dir.display()))
}

fn ls(args: &ImageArgs, json: bool) -> anyhow::Result<ExitCode> {
    let images = open(args)?.list()?;
    if json {
        let infos: Vec<forge_types::ImageInfo> = images.iter().map(Image::info).collect();
        output::line(&serde_json::to_string_pretty(&infos)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 6]> = images
        .iter()
        .map(|image| {
            let info = image.info();
            [
                info.name,
                short_id(&info.id),
                info.source.kind().to_owned(),
                info.layers.to_string(),
                if image.layers.is_empty() {
                    "-".to_owned()
                } else {
                    human_bytes(info.size_bytes)
                },
                if image.layers.is_empty() {
                    "-".to_owned()
                } else {
                    age(image.created_at)
                },
            ]
        })
        .collect();
    output::table(
        &["NAME", "ID", "SOURCE", "LAYERS", "SIZE", "CREATED"],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

async fn pull(
    args: &ImageArgs,
    reference: &str,
    platform: Option<String>,
) -> anyhow::Result<ExitCode> {
    let mut store = open(args)?;
    if platform.is_some() {
        let mut registries = store.registries().clone();
        registries.platform = platform;
        store = ImageStore::open(store.root(), registries)?;
    }
    let bars = Bars::new();
    let image = store
        .pull(reference, &bars)
        .await
        .with_context(|| format!("cannot pull {reference}"))?;
    bars.finish();
    output::line(&format!(
        "{} {} ({} layers, {})",
        image.name(),
        image.digest.as_deref().unwrap_or(&image.id),
        image.layers.len(),
        human_bytes(image.size_bytes)
    ));
    Ok(ExitCode::SUCCESS)
}

async fn import(args: ImageImportArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.store)?;
    let path = std::path::absolute(&args.file)
        .with_context(|| format!("invalid archive path {}", args.file.display()))?;
    let spinner = spinner(&format!("importing {}", args.file.display()));
    let bars = Bars::new();
    let name = args.name.clone();
    let images =
        tokio::task::spawn_blocking(move || store.import(&path, name.as_deref(), &bars)).await??;
    spinner.finish_and_clear();
    for image in images {
        output::line(&format!(
            "{} {} ({} layers, {})",
            image.name(),
            short_id(&image.id),
            image.layers.len(),
            human_bytes(image.size_bytes)
        ));
    }
    Ok(ExitCode::SUCCESS)
}

async fn build(args: ImageBuildArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.store)?;
    let build = DebianBuild {
        name: args.name.clone(),
        suite: args.suite.clone(),
        packages: args
            .packages
            .iter()
            .flat_map(|p| p.split(','))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
        variant: args.variant.clone(),
        mirror: args.mirror.clone(),
    };
    let spinner = spinner(&format!(
        "building {} from Debian {}",
        args.name, args.suite
    ));
    let log = spinner.clone();
    let progress = move |event: ProgressEvent| {
        if let ProgressEvent::Log { line } = event {
            log.set_message(line);
        }
    };
    let image =
        tokio::task::spawn_blocking(move || store.build_debian(&build, &progress)).await??;
    spinner.finish_and_clear();
    output::line(&format!(
        "{} {} ({})",
        image.name(),
        short_id(&image.id),
        human_bytes(image.size_bytes)
    ));
    Ok(ExitCode::SUCCESS)
}

fn rm(args: &ImageArgs, names: &[String], force: bool) -> anyhow::Result<ExitCode> {
    let store = open(args)?;
    let mut failed = false;
    for name in names {
        match store.remove(name, force) {
            Ok(report) => output::line(&format!(
                "removed {} ({} layers, {} freed)",
                report.images.join(", "),
                report.layers,
                human_bytes(report.freed_bytes)
            )),
            Err(err) => {
                output::error(&anyhow::Error::new(err));
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn prune(args: &ImageArgs) -> anyhow::Result<ExitCode> {
    let report = open(args)?.prune()?;
    output::line(&format!(
        "pruned {} images and {} layers, {} freed",
        report.images.len(),
        report.layers,
        human_bytes(report.freed_bytes)
    ));
    Ok(ExitCode::SUCCESS)
}

/// One progress bar per layer of a pull.
#[derive(Clone)]
struct Bars {
    multi: MultiProgress,
    layers: Arc<Mutex<BTreeMap<usize, ProgressBar>>>,
}

impl Bars {
    fn new() -> Self {
        Self {
            multi: MultiProgress::new(),
            layers: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    fn bar(&self, index: usize, digest: &str, total: u64) -> ProgressBar {
        let mut layers = self
            .layers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        layers
            .entry(index)
            .or_insert_with(|| {
                let bar = self.multi.add(ProgressBar::new(total));
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} {msg:<10} [{bar:30}] {bytes}/{total_bytes}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix(short_id(digest));
                bar
            })
            .clone()
    }

    fn finish(&self) {
        let layers = self
            .layers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for bar in layers.values() {
            bar.finish();
        }
    }
}

impl Progress for Bars {
    fn event(&self, event: ProgressEvent) {
        match event {
            ProgressEvent::Resolved {
                reference,
                layers,
                bytes,
                ..
            } => {
                let _ = self.multi.println(format!(
                    "{reference}: {layers} layers, {}",
                    human_bytes(bytes)
                ));
            }
            ProgressEvent::LayerCached { index, digest } => {
                let bar = self.bar(index, &digest, 0);
                bar.finish_with_message("exists");
            }
            ProgressEvent::Downloading {
                index,
                digest,
                done,
                total,
            } => {
                let bar = self.bar(index, &digest, total);
                bar.set_length(total.max(done));
                bar.set_position(done);
                bar.set_message("pulling");
            }
            ProgressEvent::Unpacking { index, digest } => {
                self.bar(index, &digest, 0).set_message("unpacking");
            }
            ProgressEvent::LayerReady { index, digest } => {
                self.bar(index, &digest, 0).finish_with_message("done");
            }
            ProgressEvent::Log { line } => {
                let _ = self.multi.println(line);
            }
        }
    }
}

fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// `sha256:0123…` → `0123456789ab`.
fn short_id(id: &str) -> String {
    id.trim_start_matches("sha256:").chars().take(12).collect()
}

fn human_bytes(bytes: u64) -> String {
    indicatif::HumanBytes(bytes).to_string()
}

/// How long ago, roughly: `5 seconds ago`, `3 days ago`.
fn age(at: jiff::Timestamp) -> String {
    let seconds = jiff::Timestamp::now().as_second() - at.as_second();
    let (value, unit) = match seconds.max(0) {
        s if s < 60 => (s, "second"),
        s if s < 3600 => (s / 60, "minute"),
        s if s < 86_400 => (s / 3600, "hour"),
        s => (s / 86_400, "day"),
    };
    format!("{value} {unit}{} ago", if value == 1 { "" } else { "s" })
}
