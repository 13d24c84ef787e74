//! Golden cases: a directory with `graph.pb` and `case.json` (a list of
//! steps run in order in one session, each with `feeds` (tensor name →
//! .npy), `fetches` (tensor name → expected .npy) and `targets`), checked
//! against TensorFlow's outputs with rtol 1e-5 / atol 1e-6, or the
//! `tolerance` the case states (where TensorFlow itself approximates).
//!
//! A feed written `$TMPDIR/NAME` instead of an .npy file is the string
//! scalar of path NAME inside a fresh directory made for the loaded case
//! and removed with it (checkpoint prefixes: a case saves and restores
//! there).
//!
//! A directory holding `saved_model.pb` is a SavedModel case instead: its
//! case.json lists `steps`, each a `signature` with its `inputs` and
//! expected `outputs` by key (and the meta graph's `tags`); the model is
//! loaded as a server would load it (`session::saved_model`) and the
//! calls made in order on it (a training signature's variables carry
//! from one to the next).
//!
//! Owns: case loading and checking; `ringflow verify` and the tests use it.
//! Must not choose where the session runs: the caller passes a factory.

use crate::error::{Result, Status};
use crate::graph::{GraphSpec, load_graph};
use crate::session::saved_model::LoadedModel;
use crate::session::{RunOptions, Session, SessionOptions};
use crate::tensor::{Tensor, npy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const RTOL: f64 = 1e-5;
pub const ATOL: f64 = 1e-6;

#[derive(Debug, Clone, serde::Deserialize)]
pub struct CaseStep {
    #[serde(default)]
    pub feeds: BTreeMap<String, String>,
    #[serde(default)]
    pub fetches: BTreeMap<String, String>,
    #[serde(default)]
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct CaseFile {
    #[serde(default)]
    pub note: String,
    pub steps: Vec<CaseStep>,
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
}

/// How close a fetch must be: |got - want| <= atol + rtol * |want|.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// A loaded case: its graph and steps, with every .npy read.
pub struct GoldenCase {
    pub name: String,
    pub dir: PathBuf,
    pub graph: GraphSpec,
    pub file: CaseFile,
    /// Per step: feeds and expected fetches, in case.json order.
    pub steps: Vec<LoadedStep>,
    /// The directory `$TMPDIR` feeds point into, when the case has any.
    pub scratch: Option<ScratchDir>,
}

/// The feed-file prefix that names a path in the case's scratch directory.
pub const SCRATCH_FEED_PREFIX: &str = "$TMPDIR/";

/// A directory that is removed, with what it holds, when dropped.
pub struct ScratchDir {
    pub path: PathBuf,
}

impl ScratchDir {
    fn create(case: &str) -> Result<ScratchDir> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("ringflow-case-{case}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .map_err(|e| Status::from(e).context(format_args!("creating scratch directory {}", path.display())))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub struct LoadedStep {
    pub feeds: Vec<(String, Tensor)>,
    pub fetches: Vec<(String, Tensor)>,
    pub targets: Vec<String>,
}

/// A case directory's name and its parsed `case.json`.
fn read_case_file<F: serde::de::DeserializeOwned>(dir: &Path) -> Result<(String, F)> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.display().to_string());
    let case_path = dir.join("case.json");
    let text = std::fs::read_to_string(&case_path)
        .map_err(|e| Status::not_found(format!("cannot read {}: {e}", case_path.display())))?;
    let file =
        serde_json::from_str(&text).map_err(|e| Status::invalid_argument(format!("{}: {e}", case_path.display())))?;
    Ok((name, file))
}

impl GoldenCase {
    pub fn load(dir: &Path) -> Result<GoldenCase> {
        let (name, file) = read_case_file::<CaseFile>(dir)?;
        let graph = load_graph(dir.join("graph.pb"))?;
        let uses_scratch = file.steps.iter().flat_map(|s| s.feeds.values()).any(|f| f.starts_with(SCRATCH_FEED_PREFIX));
        let scratch = if uses_scratch { Some(ScratchDir::create(&name)?) } else { None };
        let mut steps = Vec::with_capacity(file.steps.len());
        for step in &file.steps {
            let read = |m: &BTreeMap<String, String>| -> Result<Vec<(String, Tensor)>> {
                m.iter()
                    .map(|(name, f)| match (f.strip_prefix(SCRATCH_FEED_PREFIX), &scratch) {
                        (Some(inside), Some(scratch)) => {
                            let path = scratch.path.join(inside);
                            Ok((name.clone(), Tensor::string_scalar(path.to_string_lossy().as_bytes())))
                        }
                        _ => Ok((name.clone(), npy::read_npy(dir.join(f))?)),
                    })
                    .collect()
            };
            steps.push(LoadedStep {
                feeds: read(&step.feeds)?,
                fetches: read(&step.fetches)?,
                targets: step.targets.clone(),
            });
        }
        Ok(GoldenCase { name, dir: dir.to_path_buf(), graph, file, steps, scratch })
    }

    /// The number of worker tasks the case's device pins need.
    pub fn tasks_needed(&self) -> usize {
        self.file
            .devices
            .iter()
            .filter_map(|d| crate::cluster::DeviceName::parse(d).ok()?.task)
            .map(|t| t as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Per job the case pins nodes to, the number of tasks it needs.
    pub fn jobs_needed(&self) -> Vec<(String, usize)> {
        let mut needed: BTreeMap<String, usize> = BTreeMap::new();
        for d in &self.file.devices {
            if let Ok(crate::cluster::DeviceName { job: Some(job), task: Some(task), .. }) =
                crate::cluster::DeviceName::parse(d)
            {
                let n = needed.entry(job).or_default();
                *n = (*n).max(task as usize + 1);
            }
        }
        needed.into_iter().collect()
    }

    /// Runs every step in `session`, comparing fetches.
    pub fn check(&self, session: &dyn Session) -> Result<()> {
        self.check_with(session, RunMode::Run)
    }

    /// As [`GoldenCase::check`], every step traced: `record` gets each
    /// step's index and stats (before its fetches are compared).
    pub fn check_traced(
        &self,
        session: &dyn Session,
        record: &mut dyn FnMut(usize, crate::session::RunMetadata),
    ) -> Result<()> {
        let traced = RunOptions { trace: true, ..RunOptions::default() };
        for (i, step) in self.steps.iter().enumerate() {
            let names: Vec<String> = step.fetches.iter().map(|(n, _)| n.clone()).collect();
            let (outputs, metadata) = session
                .run(&traced, step.feeds.clone(), &names, &step.targets)
                .map_err(|e| e.context(format_args!("step {i}")))?;
            record(i, metadata);
            self.compare(i, step, &outputs)?;
        }
        Ok(())
    }

    /// Checks step `i`'s outputs against its expected fetches.
    fn compare(&self, i: usize, step: &LoadedStep, outputs: &[Tensor]) -> Result<()> {
        let Tolerance { rtol, atol } = self.file.tolerance.unwrap_or(Tolerance { rtol: RTOL, atol: ATOL });
        for ((name, expected), got) in step.fetches.iter().zip(outputs) {
            got.all_close(expected, rtol, atol)
                .map_err(|why| Status::invalid_argument(format!("step {i}: fetch '{name}': {why}")))?;
        }
        Ok(())
    }

    /// Runs every step through the API `mode` names, comparing fetches.
    pub fn check_with(&self, session: &dyn Session, mode: RunMode) -> Result<()> {
        for (i, step) in self.steps.iter().enumerate() {
            let names: Vec<String> = step.fetches.iter().map(|(n, _)| n.clone()).collect();
            let outputs = match mode {
                RunMode::Run => {
                    session.run(&RunOptions::default(), step.feeds.clone(), &names, &step.targets).map(|(o, _)| o)
                }
                RunMode::Callable => {
                    let feed_names: Vec<String> = step.feeds.iter().map(|(n, _)| n.clone()).collect();
                    let handle = session.make_callable(&feed_names, &names, &step.targets);
                    handle.and_then(|h| {
                        let values = step.feeds.iter().map(|(_, t)| t.clone()).collect();
                        let out = session.run_callable(h, values, &RunOptions::default()).map(|(o, _)| o);
                        session.release_callable(h).and(out)
                    })
                }
                RunMode::Partial => {
                    let feed_names: Vec<String> = step.feeds.iter().map(|(n, _)| n.clone()).collect();
                    session
                        .partial_run_setup(&feed_names, &names, &step.targets)
                        .and_then(|h| session.partial_run(&h, step.feeds.clone(), &names))
                }
            }
            .map_err(|e| e.context(format_args!("step {i}")))?;
            self.compare(i, step, &outputs)?;
        }
        Ok(())
    }
}

/// case.json of a SavedModel case.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct SavedModelCaseFile {
    #[serde(default)]
    pub note: String,
    #[serde(default = "crate::session::saved_model::default_tags")]
    pub tags: Vec<String>,
    /// Signature calls, run in order on one loaded model.
    pub steps: Vec<SignatureCallFile>,
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
}

/// One signature call of a SavedModel case: inputs and expected outputs
/// by key, each an .npy file.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct SignatureCallFile {
    pub signature: String,
    pub inputs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
}

/// A signature call with its .npy files read.
pub struct SignatureCall {
    pub signature: String,
    pub inputs: Vec<(String, Tensor)>,
    pub outputs: Vec<(String, Tensor)>,
}

/// A loaded SavedModel case: the model's directory and its signature
/// calls, with the outputs TensorFlow gave.
pub struct SavedModelCase {
    pub name: String,
    pub dir: PathBuf,
    pub file: SavedModelCaseFile,
    pub steps: Vec<SignatureCall>,
}

/// Whether `dir` is a SavedModel case (it holds `saved_model.pb`).
pub fn is_saved_model_case(dir: &Path) -> bool {
    dir.join("saved_model.pb").is_file()
}

impl SavedModelCase {
    pub fn load(dir: &Path) -> Result<SavedModelCase> {
        let (name, file) = read_case_file::<SavedModelCaseFile>(dir)?;
        let read = |m: &BTreeMap<String, String>| -> Result<Vec<(String, Tensor)>> {
            m.iter().map(|(key, f)| Ok((key.clone(), npy::read_npy(dir.join(f))?))).collect()
        };
        let steps = file
            .steps
            .iter()
            .map(|s| {
                Ok(SignatureCall {
                    signature: s.signature.clone(),
                    inputs: read(&s.inputs)?,
                    outputs: read(&s.outputs)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(SavedModelCase { name, dir: dir.to_path_buf(), file, steps })
    }

    /// Loads the model with `options` (restore, init op), makes each
    /// signature call in order and compares every output.
    pub fn check(&self, options: &SessionOptions) -> Result<()> {
        let model = LoadedModel::load(&self.dir, &self.file.tags, options)?;
        let result = self.check_loaded(&model);
        let closed = model.close();
        result.and(closed)
    }

    /// Makes the calls on an already loaded model and compares.
    pub fn check_loaded(&self, model: &LoadedModel) -> Result<()> {
        let Tolerance { rtol, atol } = self.file.tolerance.unwrap_or(Tolerance { rtol: RTOL, atol: ATOL });
        for (i, step) in self.steps.iter().enumerate() {
            let keys: Vec<String> = step.outputs.iter().map(|(k, _)| k.clone()).collect();
            let got = model.run(&step.signature, step.inputs.clone(), &keys)?;
            for ((key, expected), (_, got)) in step.outputs.iter().zip(&got) {
                got.all_close(expected, rtol, atol).map_err(|why| {
                    Status::invalid_argument(format!("step {i} ('{}'): output '{key}': {why}", step.signature))
                })?;
            }
        }
        Ok(())
    }
}

/// Which session API a case is checked through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    Run,
    Callable,
    Partial,
}

/// Loads and checks one case directory in a session made by `make_session`;
/// returns `Ok` or the reason it failed.
pub fn verify_case(dir: &Path, make_session: &dyn Fn(&GoldenCase) -> Result<Box<dyn Session>>) -> Result<()> {
    verify_case_traced(dir, None, make_session)
}

/// What a traced check hands each step to: case name, step index, stats.
pub type StepRecorder<'a> = dyn FnMut(&str, usize, crate::session::RunMetadata) + 'a;

/// [`verify_case`]; with `record`, every step is traced and `record` gets
/// the case's name, the step's index and its stats.
pub fn verify_case_traced(
    dir: &Path,
    record: Option<&mut StepRecorder<'_>>,
    make_session: &dyn Fn(&GoldenCase) -> Result<Box<dyn Session>>,
) -> Result<()> {
    let case = GoldenCase::load(dir)?;
    let session = make_session(&case)?;
    let result = match record {
        Some(record) => case.check_traced(session.as_ref(), &mut |i, m| record(&case.name, i, m)),
        None => case.check(session.as_ref()),
    };
    let closed = session.close();
    result.and(closed)
}
