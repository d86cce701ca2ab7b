//! When a self-play side resigns: its root value at or below a threshold for
//! `resign_consecutive` of its own full searches in a row. The threshold is
//! fixed, or calibrated as AlphaGo Zero's is: moved so that, among the sides
//! of no-resign games that would have resigned, at most a target share did
//! not go on to lose. A fixed threshold cannot stay right: as the value head
//! sharpens, more positions cross it, and the resignations it allows teach
//! the value to cross it sooner (at -0.92, 41% of would-be resignations were
//! wrong by the end of a 30-minute run; README, Status).

use std::collections::VecDeque;

use engine::{Color, Outcome};

/// Lowest threshold there is: a side resigns there only when every visit of
/// `resign_consecutive` searches in a row found a loss. Where the
/// calibration has too few games to go on, it stays here.
const FLOOR: f32 = -1.0;

/// Sides of no-resign games the calibration remembers: about the last 500
/// such games, enough for a 5% rate to be measured within a couple of points
/// and recent enough to follow a net that changes every few hundred games.
const WINDOW: usize = 1000;

/// Sides it needs before it moves off [`FLOOR`].
const MIN_SIDES: usize = 100;

/// One side's root values of its last `resign_consecutive` full searches.
#[derive(Clone, Debug)]
pub struct Streak {
    values: VecDeque<f32>,
    len: usize,
    /// The lowest threshold at which this side would have resigned so far.
    point: Option<f32>,
}

impl Streak {
    pub fn new(consecutive: usize) -> Streak {
        Streak {
            values: VecDeque::with_capacity(consecutive),
            len: consecutive,
            point: None,
        }
    }

    /// Adds a full search's root value and returns the highest of the last
    /// `consecutive`, once there are that many: the side resigns when it is
    /// at or below the threshold.
    pub fn push(&mut self, value: f32) -> Option<f32> {
        if self.values.len() == self.len {
            self.values.pop_front();
        }
        self.values.push_back(value);
        if self.values.len() < self.len {
            return None;
        }
        let high = self.values.iter().copied().fold(f32::MIN, f32::max);
        self.point = Some(self.point.map_or(high, |p| p.min(high)));
        Some(high)
    }

    /// The lowest threshold at which the side would have resigned in the
    /// game so far (`None`: it has not had `consecutive` full searches).
    pub fn point(&self) -> Option<f32> {
        self.point
    }
}

/// The threshold self-play resigns at, shared by the workers.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The most false positives allowed; 0 = the threshold stays `ceiling`.
    target: f64,
    /// The fixed threshold, or the highest the calibrated one may reach.
    ceiling: f32,
    /// Each side's resign point in a recent no-resign game, and whether it lost.
    sides: VecDeque<(f32, bool)>,
    threshold: f32,
}

impl Calibration {
    pub fn new(ceiling: f32, target: f64) -> Calibration {
        Calibration {
            target,
            ceiling,
            sides: VecDeque::with_capacity(WINDOW),
            threshold: if target > 0.0 { FLOOR } else { ceiling },
        }
    }

    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// Adds a finished no-resign game: each side's resign point (see
    /// [`Streak::point`]) and the outcome.
    pub fn record(&mut self, points: [Option<f32>; 2], outcome: Outcome) {
        if self.target == 0.0 {
            return;
        }
        for color in [Color::White, Color::Black] {
            if let Some(point) = points[color.index()] {
                if self.sides.len() == WINDOW {
                    self.sides.pop_front();
                }
                self.sides
                    .push_back((point, outcome.winner == Some(!color)));
            }
        }
        self.threshold = self.calibrate();
    }

    /// The highest threshold, up to the ceiling, at which the share of
    /// would-be resigners that did not lose is within the target.
    fn calibrate(&self) -> f32 {
        if self.sides.len() < MIN_SIDES {
            return FLOOR;
        }
        let mut sorted: Vec<(f32, bool)> = self.sides.iter().copied().collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut threshold = FLOOR;
        let mut wrong = 0usize;
        for (i, &(point, lost)) in sorted.iter().enumerate() {
            if point > self.ceiling {
                break;
            }
            wrong += !lost as usize;
            // Ties resign together: judge a threshold once all of them are in.
            let last_of_tie = sorted.get(i + 1).is_none_or(|next| next.0 > point);
            // Sorted, so each threshold that qualifies is the highest yet.
            if last_of_tie && wrong as f64 <= self.target * (i + 1) as f64 {
                threshold = point;
            }
        }
        threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Reason;

    #[test]
    fn a_streak_is_the_highest_of_the_last_searches() {
        let mut streak = Streak::new(3);
        assert_eq!(streak.push(-0.9), None);
        assert_eq!(streak.push(-0.95), None);
        assert_eq!(streak.point(), None);
        assert_eq!(streak.push(-0.97), Some(-0.9));
        assert_eq!(streak.push(-0.99), Some(-0.95));
        assert_eq!(streak.push(0.2), Some(0.2));
        // The lowest it reached on the way.
        assert_eq!(streak.point(), Some(-0.95));
    }

    #[test]
    fn a_fixed_threshold_does_not_move() {
        let mut fixed = Calibration::new(-0.9, 0.0);
        for _ in 0..200 {
            fixed.record([Some(-0.95), None], Outcome::draw(Reason::Adjudication));
        }
        assert_eq!(fixed.threshold(), -0.9);
    }

    /// White's point is `point`; it loses unless `saved`.
    fn game(calibration: &mut Calibration, point: f32, saved: bool) {
        let outcome = if saved {
            Outcome::draw(Reason::Adjudication)
        } else {
            Outcome::win(Color::Black, Reason::Checkmate)
        };
        calibration.record([Some(point), None], outcome);
    }

    #[test]
    fn the_threshold_keeps_false_positives_within_the_target() {
        let mut calibration = Calibration::new(-0.5, 0.05);
        // Too few games: only a proven loss resigns.
        for _ in 0..MIN_SIDES - 1 {
            game(&mut calibration, -0.99, false);
        }
        assert_eq!(calibration.threshold(), FLOOR);
        game(&mut calibration, -0.99, false);
        assert_eq!(calibration.threshold(), -0.99);
        // 100 right at -0.99, then 20 sides at -0.9, 10 of them saved: at
        // -0.9 the rate is 10 / 120 > 5%, so the threshold stays.
        for i in 0..20 {
            game(&mut calibration, -0.9, i % 2 == 0);
        }
        assert_eq!(calibration.threshold(), -0.99);
        // 80 more right ones at -0.8: 10 wrong of 200 is 5%, and -0.8 it is.
        for _ in 0..80 {
            game(&mut calibration, -0.8, false);
        }
        assert_eq!(calibration.threshold(), -0.8);
        // Never above the ceiling, however right the sides above it were.
        for _ in 0..200 {
            game(&mut calibration, -0.2, false);
        }
        assert_eq!(calibration.threshold(), -0.8);
    }

    #[test]
    fn the_window_forgets_old_games() {
        let mut calibration = Calibration::new(-0.5, 0.05);
        for _ in 0..WINDOW {
            game(&mut calibration, -0.9, true);
        }
        assert_eq!(calibration.threshold(), FLOOR);
        for _ in 0..WINDOW {
            game(&mut calibration, -0.9, false);
        }
        assert_eq!(calibration.threshold(), -0.9);
    }
}
