//! Errors of the engine. Every error says what was wrong and where (file, line, field).

use std::fmt;

/// Where in an input a problem was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// File name (or `<built-in NAME>`, `<inline>`, `--set`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted field path (`machine.tlb.l1_4k_ways`), when known.
    pub field: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        Ok(())
    }
}

/// All errors the engine reports.
#[derive(Clone, Debug, PartialEq)]
pub enum SimError {
    /// A scenario, override or workload parameter is invalid.
    Config { at: Location, msg: String },
    /// A masim configuration file is malformed.
    Masim { at: Location, msg: String },
    /// A recording or trace given to replay is malformed.
    Input { at: Location, msg: String },
    /// The simulated program did something the machine cannot do (access outside any
    /// mapping, memory exhausted on every node, ...).
    Runtime(String),
}

impl SimError {
    /// A configuration error at `file` (no line known), for `field`.
    pub fn config(file: impl Into<String>, field: impl Into<String>, msg: impl Into<String>) -> Self {
        SimError::Config {
            at: Location { file: file.into(), line: None, field: Some(field.into()) },
            msg: msg.into(),
        }
    }
    /// A runtime error.
    pub fn runtime(msg: impl Into<String>) -> Self {
        SimError::Runtime(msg.into())
    }
    /// Short name of the error's kind, for the Python side (`config`, `masim`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            SimError::Config { .. } => "config",
            SimError::Masim { .. } => "masim",
            SimError::Input { .. } => "input",
            SimError::Runtime(_) => "runtime",
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Config { at, msg } => write!(f, "{at}: {msg}"),
            SimError::Masim { at, msg } => write!(f, "{at}: {msg}"),
            SimError::Input { at, msg } => write!(f, "{at}: {msg}"),
            SimError::Runtime(msg) => write!(f, "simulation error: {msg}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Result alias of the engine.
pub type Result<T, E = SimError> = std::result::Result<T, E>;
