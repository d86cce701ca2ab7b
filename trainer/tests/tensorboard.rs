//! MetricsLog's event files must load in TensorBoard's own reader (PyPI
//! `tensorboard`, driven by scripts/check_tensorboard.py). scripts/test.sh
//! installs it and sets MIXZERO_PYTHON; plain `cargo test` falls back to
//! setup.sh's venv and skips, with a note, if no Python has tensorboard.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use trainer::metrics::MetricsLog;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scripts/check_tensorboard.py"
);

/// MIXZERO_PYTHON, else setup.sh's venv (same default path as setup.sh):
/// the first that can import tensorboard.
fn python() -> Option<PathBuf> {
    let venv = env::var_os("MIXZERO_TORCH_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            env::var_os("HOME").map(|home| Path::new(&home).join(".cache/mixzero/torch-2.11.0"))
        });
    let candidates = env::var_os("MIXZERO_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain(venv.map(|v| v.join("bin/python")));
    let found = candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import tensorboard"])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    if found.is_none() {
        eprintln!(
            "NOTE: skipping the TensorBoard reader check: no Python with the `tensorboard` \
             package (set MIXZERO_PYTHON or run scripts/test.sh, which installs it)"
        );
    }
    found
}

fn check(python: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(python)
        .arg(SCRIPT)
        .arg(dir)
        .args(args)
        .output()
        .expect("running check_tensorboard.py")
}

fn unix_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn tensorboard_reads_our_scalars() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let before = unix_time();
    {
        let mut log = MetricsLog::open(dir.path()).unwrap();
        for step in [0, 100, 200] {
            log.scalars(
                step,
                &[
                    ("loss/policy", 3.0 - step as f64 / 100.0),
                    ("loss/value", 0.5),
                    ("loss/moves_left", 0.25),
                    ("loss/reply", 4.0),
                ],
            );
        }
        log.scalar("loss/value", f64::NAN, 250);
    }
    // A resumed run appends: TensorBoard must see both runs' points.
    MetricsLog::open(dir.path())
        .unwrap()
        .scalar("loss/policy", 0.25, 300);
    let after = unix_time();

    let out = check(
        &python,
        dir.path(),
        &[
            "--json",
            "--expect",
            "loss/policy",
            "--expect",
            "loss/value",
            "--expect",
            "loss/moves_left",
            "--expect",
            "loss/reply",
        ],
    );
    assert!(
        out.status.success(),
        "check_tensorboard.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scalars: Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = |tag: &str| -> Vec<(u64, f64)> {
        scalars[tag]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
            .collect()
    };
    assert_eq!(
        points("loss/policy"),
        [(0, 3.0), (100, 2.0), (200, 1.0), (300, 0.25)]
    );
    assert_eq!(points("loss/value"), [(0, 0.5), (100, 0.5), (200, 0.5)]);
    // The auxiliary heads' losses, as `mixzero train` logs them beside these.
    assert_eq!(
        points("loss/moves_left"),
        [(0, 0.25), (100, 0.25), (200, 0.25)]
    );
    assert_eq!(points("loss/reply"), [(0, 4.0), (100, 4.0), (200, 4.0)]);
    for point in scalars
        .as_object()
        .unwrap()
        .values()
        .flat_map(|p| p.as_array().unwrap())
    {
        let wall_time = point[2].as_f64().unwrap();
        assert!(
            (before..=after).contains(&wall_time),
            "wall time {wall_time} outside the run"
        );
    }
}

#[test]
fn check_script_fails_on_missing_tags_and_empty_dirs() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    assert!(
        !check(&python, dir.path(), &[]).status.success(),
        "empty dir accepted"
    );

    MetricsLog::open(dir.path())
        .unwrap()
        .scalar("games", 4.0, 1);
    let out = check(&python, dir.path(), &["--expect", "games"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("games\tpoints 1\tlast step 1\tlast value 4")
    );

    let out = check(
        &python,
        dir.path(),
        &["--expect", "games", "--expect", "loss/policy"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing tags: loss/policy"));
}
