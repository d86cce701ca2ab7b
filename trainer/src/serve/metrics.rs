//! The training view's data: `logs/metrics.jsonl` of the run directory as
//! one series per tag, thinned so that a long run stays a small answer.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::protocol::ProtocolError;
use crate::metrics::JSONL_FILE;

/// Points kept per tag; the page draws a few hundred pixels wide.
const MAX_POINTS: usize = 1000;

#[derive(Deserialize)]
struct Record {
    time: f64,
    step: u64,
    tag: String,
    value: f64,
}

/// `GET /api/metrics`: `[step, time, value]` points per tag, oldest first.
#[derive(Serialize, Default)]
pub struct MetricsMsg {
    /// The file exists (a run without logs yet has none).
    pub found: bool,
    pub series: BTreeMap<String, Vec<(u64, f64, f64)>>,
}

/// Reads `run_dir/logs/metrics.jsonl`. Lines that do not parse (the last
/// one may be half written) are skipped.
pub fn read(run_dir: &Path) -> Result<MetricsMsg, ProtocolError> {
    let path = run_dir.join("logs").join(JSONL_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MetricsMsg::default()),
        Err(e) => return Err(e.into()),
    };
    let mut series: BTreeMap<String, Vec<(u64, f64, f64)>> = BTreeMap::new();
    for line in BufReader::new(file).split(b'\n') {
        let Ok(record) = serde_json::from_slice::<Record>(&line?) else {
            continue;
        };
        if record.value.is_finite() {
            series
                .entry(record.tag)
                .or_default()
                .push((record.step, record.time, record.value));
        }
    }
    for points in series.values_mut() {
        *points = thin(points);
    }
    Ok(MetricsMsg {
        found: true,
        series,
    })
}

/// At most [`MAX_POINTS`] evenly spaced points, the last one always kept.
fn thin<T: Copy>(points: &[T]) -> Vec<T> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    // One point short of the cap, for the last one.
    let stride = points.len().div_ceil(MAX_POINTS - 1);
    let mut kept: Vec<T> = points.iter().step_by(stride).copied().collect();
    if (points.len() - 1) % stride != 0 {
        kept.push(points[points.len() - 1]);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_series_and_skips_broken_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let mut text = String::new();
        for step in 0..3000u64 {
            text.push_str(&format!(
                "{{\"time\":{}.5,\"step\":{step},\"tag\":\"loss/policy\",\"value\":{}}}\n",
                1000 + step,
                3.0 - step as f64 / 1000.0
            ));
        }
        text.push_str("{\"time\":1,\"step\":5,\"tag\":\"ladder/elo_vs_random\",\"value\":12}\n");
        text.push_str("{\"time\":1,\"step\":");
        std::fs::write(dir.path().join("logs").join(JSONL_FILE), text).unwrap();
        let msg = read(dir.path()).unwrap();
        assert!(msg.found);
        let policy = &msg.series["loss/policy"];
        assert!(policy.len() <= MAX_POINTS && policy.len() > MAX_POINTS / 2);
        assert_eq!(policy[0].0, 0);
        assert_eq!(policy.last().unwrap().0, 2999);
        assert_eq!(msg.series["ladder/elo_vs_random"], vec![(5, 1.0, 12.0)]);
        assert!(!read(&dir.path().join("nothing")).unwrap().found);
    }
}
