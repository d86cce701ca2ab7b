//! A search's progress as a UCI `info` line, and its root moves'
//! statistics as `info string` lines.

use std::fmt;

use crate::search::{MoveStats, Score, SearchInfo};

impl fmt::Display for SearchInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "info depth {}", self.depth)?;
        if let Some(seldepth) = self.seldepth {
            write!(f, " seldepth {seldepth}")?;
        }
        let nps = self.nodes as f64 / self.time.as_secs_f64().max(1e-3);
        write!(
            f,
            " nodes {} nps {nps:.0} time {}",
            self.nodes,
            self.time.as_millis()
        )?;
        match self.score {
            Score::Centipawns(cp) => write!(f, " score cp {cp}")?,
            Score::Mate(moves) => write!(f, " score mate {moves}")?,
        }
        if let Some(wdl) = self.wdl {
            write!(f, " wdl {} {} {}", wdl.win, wdl.draw, wdl.loss)?;
        }
        if !self.pv.is_empty() {
            f.write_str(" pv")?;
            for mv in &self.pv {
                write!(f, " {mv}")?;
            }
        }
        Ok(())
    }
}

/// lc0's `VerboseMoveStats` line, shortened to what every searcher here
/// knows: `info string e2e5 N: 12 (P: 3.10%) (Q: +0.1234)`, with `(Q: -)`
/// for a move not visited yet.
impl fmt::Display for MoveStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "info string {} N: {} (P: {:.2}%)",
            self.mv,
            self.visits,
            self.prior * 100.0
        )?;
        match self.q {
            Some(q) => write!(f, " (Q: {q:+.4})"),
            None => f.write_str(" (Q: -)"),
        }
    }
}
