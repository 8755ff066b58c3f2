//! Stages: a run in several simulations, each one's output the next one's input.
//!
//! A scenario names its stages in `[[stages]]` (each with a `name`, `set` overrides applied to
//! the scenario for that stage, and optionally the `input` stage whose output it takes), or a
//! policy asks for one: profile-guided placement in `next-run` mode runs a `profile` stage
//! (the same scenario with `mode = "profile"` and no telemetry) before the reported `run`.

use crate::error::{Location, Result, SimError};
pub use crate::scenario::StageConfig;
use crate::scenario::{apply_override, validate_stage, Scenario};

/// A planned stage.
#[derive(Clone, Debug)]
pub struct Stage {
    /// Name.
    pub name: String,
    /// The scenario it runs.
    pub scenario: Scenario,
    /// The stage whose output it takes.
    pub input: Option<String>,
}

/// The stages of `sc` in order (one, `run`, for a scenario without stages).
pub fn plan(sc: &Scenario, file: &str) -> Result<Vec<Stage>> {
    if !sc.stages.is_empty() {
        let mut out: Vec<Stage> = Vec::new();
        for (i, st) in sc.stages.iter().enumerate() {
            if let Some(input) = &st.input {
                if !out.iter().any(|s| &s.name == input) {
                    return Err(SimError::config(
                        file,
                        format!("stages[{i}].input"),
                        format!("`{input}` is not an earlier stage"),
                    ));
                }
            }
            let scenario = with_overrides(sc, &st.set, file, i)?;
            out.push(Stage { name: st.name.clone(), scenario, input: st.input.clone() });
        }
        return Ok(out);
    }
    if let Some(req) = sc.placement.as_ref().and_then(|p| p.stage()) {
        let mut prof = sc.clone();
        if req.without_telemetry {
            prof.telemetry.clear();
        }
        prof.sweep.clear();
        prof.placement = Some(req.placement);
        return Ok(vec![
            Stage { name: req.name.clone(), scenario: prof, input: None },
            Stage { name: "run".into(), scenario: sc.clone(), input: Some(req.name) },
        ]);
    }
    Ok(vec![Stage { name: "run".into(), scenario: sc.clone(), input: None }])
}

/// `sc` with the stage's overrides applied (and without stages).
fn with_overrides(sc: &Scenario, set: &[String], file: &str, index: usize) -> Result<Scenario> {
    let mut base = sc.clone();
    base.stages.clear();
    if set.is_empty() {
        return Ok(base);
    }
    let text = toml::to_string(&base).expect("scenario serializes");
    let mut table: toml::Table = toml::from_str(&text).expect("an exported scenario parses");
    for o in set {
        apply_override(&mut table, o)?;
    }
    let text = toml::to_string(&table).expect("table serializes");
    let stage: Scenario = toml::from_str(&text).map_err(|e| SimError::Config {
        at: Location { file: file.to_string(), line: None, field: Some(format!("stages[{index}].set")) },
        msg: e.message().trim().to_string(),
    })?;
    validate_stage(&stage, file, index)?;
    Ok(stage)
}
