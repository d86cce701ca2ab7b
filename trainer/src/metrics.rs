//! Scalar metrics of a training run, written twice: as TensorBoard event
//! files (`tensorboard --logdir <dir>`) and as `metrics.jsonl` for scripts.
//!
//! `metrics.jsonl` holds one JSON object per scalar and line, appended in
//! the order logged:
//!
//! ```json
//! {"time":1767225600.125,"step":1200,"tag":"loss/policy","value":2.31}
//! ```
//!
//! `time` is Unix seconds; `step` is whatever counter the caller logs
//! against. Reopening a directory appends, so a resumed run keeps its
//! history in both forms (each open starts a new event file, which
//! TensorBoard reads after the older ones).
//!
//! The event files use tensorboard-rs's record framing and protobuf types,
//! but not its `SummaryWriter`: that one names its file by second and pid
//! only, so reopening within the same second truncates the earlier file, it
//! panics on I/O errors (in a background thread, then on the next call),
//! and its `flush` returns before the data is written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use protobuf::{Message, RepeatedField};
use serde::Serialize;
use tensorboard_proto::event::Event;
use tensorboard_proto::summary::{Summary, Summary_Value};
use tensorboard_rs::record_writer::RecordWriter;
use tracing::warn;

/// Name of the JSON-lines file inside the metrics directory.
pub const JSONL_FILE: &str = "metrics.jsonl";

/// Buffered records are flushed at least this often, so a live TensorBoard
/// keeps up and a killed run loses only the last few seconds.
const FLUSH_EVERY: Duration = Duration::from_secs(5);

pub struct MetricsLog {
    dir: PathBuf,
    jsonl: BufWriter<File>,
    events: RecordWriter<BufWriter<File>>,
    last_flush: Instant,
    /// Set while writes fail, so a full disk warns once rather than per call.
    failing: bool,
}

#[derive(Serialize)]
struct Record<'a> {
    time: f64,
    step: u64,
    tag: &'a str,
    value: f64,
}

impl MetricsLog {
    /// Opens (creating it if needed) a metrics directory: appends to its
    /// `metrics.jsonl` and starts a new TensorBoard event file in it.
    pub fn open(dir: &Path) -> anyhow::Result<MetricsLog> {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating metrics directory {}", dir.display()))?;
        let jsonl_path = dir.join(JSONL_FILE);
        let jsonl =
            open_jsonl(&jsonl_path).with_context(|| format!("opening {}", jsonl_path.display()))?;
        let events = create_event_file(dir)
            .with_context(|| format!("creating an event file in {}", dir.display()))?;
        let mut log = MetricsLog {
            dir: dir.to_path_buf(),
            jsonl,
            events: RecordWriter::new(events),
            last_flush: Instant::now(),
            failing: false,
        };
        let mut header = Event::new();
        header.set_wall_time(unix_time());
        header.set_file_version("brain.Event:2".to_string());
        write_event(&mut log.events, &header)
            .and_then(|()| log.events.flush())
            .with_context(|| format!("writing an event file in {}", dir.display()))?;
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn scalar(&mut self, tag: &str, value: f64, step: u64) {
        self.scalars(step, &[(tag, value)]);
    }

    /// Logs several scalars at one step (one TensorBoard event, one line each
    /// in the jsonl). Non-finite values are skipped with a warning.
    pub fn scalars(&mut self, step: u64, values: &[(&str, f64)]) {
        let finite: Vec<(&str, f64)> = values
            .iter()
            .copied()
            .filter(|&(tag, value)| {
                if !value.is_finite() {
                    warn!(tag, value, step, "metrics: skipping non-finite value");
                }
                value.is_finite()
            })
            .collect();
        if finite.is_empty() {
            return;
        }
        let time = unix_time();
        let events = self.write_tensorboard(time, step, &finite);
        let jsonl = self.write_jsonl(time, step, &finite);
        self.check("writing", events.and(jsonl));
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// Pushes buffered records to the files (also done every few seconds
    /// while logging, and on drop).
    pub fn flush(&mut self) {
        self.last_flush = Instant::now();
        let events = self.events.flush();
        let jsonl = self.jsonl.flush();
        self.check("flushing", events.and(jsonl));
    }

    fn write_tensorboard(
        &mut self,
        time: f64,
        step: u64,
        values: &[(&str, f64)],
    ) -> io::Result<()> {
        let values = values.iter().map(|&(tag, value)| {
            let mut v = Summary_Value::new();
            v.set_tag(tag.to_string());
            v.set_simple_value(value as f32);
            v
        });
        let mut summary = Summary::new();
        summary.set_value(RepeatedField::from_vec(values.collect()));
        let mut event = Event::new();
        event.set_wall_time(time);
        event.set_step(i64::try_from(step).unwrap_or(i64::MAX));
        event.set_summary(summary);
        write_event(&mut self.events, &event)
    }

    fn write_jsonl(&mut self, time: f64, step: u64, values: &[(&str, f64)]) -> io::Result<()> {
        for &(tag, value) in values {
            serde_json::to_writer(
                &mut self.jsonl,
                &Record {
                    time,
                    step,
                    tag,
                    value,
                },
            )?;
            self.jsonl.write_all(b"\n")?;
        }
        Ok(())
    }

    fn check(&mut self, what: &str, result: io::Result<()>) {
        match result {
            Ok(()) => self.failing = false,
            Err(error) if !self.failing => {
                self.failing = true;
                warn!(dir = %self.dir.display(), %error, "metrics: {what} failed (repeats not reported)");
            }
            Err(_) => {}
        }
    }
}

impl Drop for MetricsLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn unix_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Opens for appending; if a crash left a partial last line, ends it first
/// so that the next record starts on a line of its own.
pub(crate) fn open_jsonl(path: &Path) -> io::Result<BufWriter<File>> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    if file.metadata()?.len() > 0 {
        let mut last = [0u8];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            file.write_all(b"\n")?;
        }
    }
    Ok(BufWriter::new(file))
}

/// A fresh event file named like TensorFlow's (`events.out.tfevents.<secs>…`,
/// so newer files sort after older ones) plus a counter that keeps two opens
/// in the same second and process from colliding.
fn create_event_file(dir: &Path) -> io::Result<BufWriter<File>> {
    let secs = unix_time() as u64;
    let pid = std::process::id();
    for n in 0u32.. {
        let path = dir.join(format!("events.out.tfevents.{secs:010}.mixzero.{pid}.{n}"));
        match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => return Ok(BufWriter::new(file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 counter exhausted")
}

fn write_event(writer: &mut RecordWriter<BufWriter<File>>, event: &Event) -> io::Result<()> {
    let bytes = event.write_to_bytes().map_err(io::Error::other)?;
    writer.write(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tensorboard_rs::masked_crc32c::masked_crc32c;

    fn read_jsonl(dir: &Path) -> Vec<Value> {
        fs::read_to_string(dir.join(JSONL_FILE))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn event_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .contains("tfevents")
            })
            .collect();
        files.sort();
        files
    }

    /// Decodes an event file by hand (TFRecord framing, CRCs checked) into
    /// (step, tag, value) triples.
    fn read_events(path: &Path) -> Vec<(i64, String, f32)> {
        let bytes = fs::read(path).unwrap();
        let mut rest = &bytes[..];
        let mut scalars = Vec::new();
        while !rest.is_empty() {
            let (header, tail) = rest.split_at(12);
            assert_eq!(masked_crc32c(&header[..8]).to_le_bytes(), header[8..12]);
            let len = u64::from_le_bytes(header[..8].try_into().unwrap()) as usize;
            let (data, tail) = tail.split_at(len);
            let (crc, tail) = tail.split_at(4);
            assert_eq!(masked_crc32c(data).to_le_bytes(), crc);
            let event = Event::parse_from_bytes(data).unwrap();
            for v in event.get_summary().get_value() {
                scalars.push((
                    event.get_step(),
                    v.get_tag().to_string(),
                    v.get_simple_value(),
                ));
            }
            rest = tail;
        }
        scalars
    }

    #[test]
    fn jsonl_has_one_object_per_scalar() {
        let dir = tempfile::tempdir().unwrap();
        let before = unix_time();
        let mut log = MetricsLog::open(dir.path()).unwrap();
        log.scalar("loss/policy", 2.5, 7);
        log.scalars(8, &[("loss/value", 0.25), ("games", 12.0)]);
        drop(log);

        let records = read_jsonl(dir.path());
        let got: Vec<(u64, &str, f64)> = records
            .iter()
            .map(|r| {
                (
                    r["step"].as_u64().unwrap(),
                    r["tag"].as_str().unwrap(),
                    r["value"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (7, "loss/policy", 2.5),
                (8, "loss/value", 0.25),
                (8, "games", 12.0)
            ]
        );
        for r in &records {
            let time = r["time"].as_f64().unwrap();
            assert!(time >= before && time <= unix_time(), "time {time}");
        }
    }

    #[test]
    fn reopening_appends_to_both_outputs() {
        let dir = tempfile::tempdir().unwrap();
        for (run, step) in [(1.0, 10), (2.0, 20)] {
            let mut log = MetricsLog::open(dir.path()).unwrap();
            log.scalar("run", run, step);
        }
        let steps: Vec<u64> = read_jsonl(dir.path())
            .iter()
            .map(|r| r["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [10, 20]);

        // Both opens happen within one second in one process: they must not
        // share (and truncate) an event file.
        let files = event_files(dir.path());
        assert_eq!(files.len(), 2);
        let events: Vec<_> = files.iter().flat_map(|f| read_events(f)).collect();
        assert_eq!(
            events,
            [(10, "run".to_string(), 1.0), (20, "run".to_string(), 2.0)]
        );
    }

    #[test]
    fn partial_last_line_is_ended_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(JSONL_FILE), "{\"time\":1.0,\"step\":1,\"ta").unwrap();
        MetricsLog::open(dir.path()).unwrap().scalar("x", 1.0, 2);
        let text = fs::read_to_string(dir.path().join(JSONL_FILE)).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert_eq!(last["step"], 2);
    }

    #[test]
    fn non_finite_values_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MetricsLog::open(dir.path()).unwrap();
        log.scalars(1, &[("nan", f64::NAN), ("ok", 1.5), ("inf", f64::INFINITY)]);
        log.scalar("nan", f64::NAN, 2);
        drop(log);

        let tags: Vec<String> = read_jsonl(dir.path())
            .iter()
            .map(|r| r["tag"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(tags, ["ok"]);
        let events: Vec<_> = event_files(dir.path())
            .iter()
            .flat_map(|f| read_events(f))
            .collect();
        assert_eq!(events, [(1, "ok".to_string(), 1.5)]);
    }

    #[test]
    fn open_fails_cleanly_on_a_file_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, "").unwrap();
        assert!(MetricsLog::open(&file).is_err());
    }
}
