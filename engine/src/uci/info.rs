//! A search's progress as a UCI `info` line.

use std::fmt;

use crate::search::{Score, SearchInfo};

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
