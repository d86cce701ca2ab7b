//! Rules 5 and 6 (RULES.md §5, §6) and the switch that turns them off.

use crate::types::{Color, Kind};

/// Which rule set is in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rules {
    /// Every rule of Chess-mix.
    #[default]
    Full,
    /// Rules 5 and 6 off, to compare with engines that lack them.
    Base,
}

/// A control period for rule 5: full moves `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    pub first: u32,
    pub last: u32,
}

/// The control period of `color` that contains full move `n`, if any.
/// White: 1-10, then 10k+1..10k+5; Black: 1-10, then 10k+6..10k+10.
#[inline]
pub const fn control_period(color: Color, n: u32) -> Option<Period> {
    if n == 0 {
        return None;
    }
    if n <= 10 {
        return Some(Period { first: 1, last: 10 });
    }
    let base = (n - 1) / 10 * 10;
    let offset = n - base; // 1..=10
    match (color, offset <= 5) {
        (Color::White, true) => Some(Period {
            first: base + 1,
            last: base + 5,
        }),
        (Color::Black, false) => Some(Period {
            first: base + 6,
            last: base + 10,
        }),
        _ => None,
    }
}

/// Rule 6 history of one side: the kind it moved on its last turn and how
/// many of its turns in a row moved that kind (capped at 2, the ban).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Run {
    pub kind: Option<Kind>,
    pub length: u8,
}

impl Run {
    /// The kind this side may not move next.
    #[inline]
    pub const fn banned(self) -> Option<Kind> {
        if self.length >= 2 {
            self.kind
        } else {
            None
        }
    }

    /// The history after a move of `kind`; a king move breaks the run.
    #[inline]
    pub fn after(self, kind: Kind) -> Run {
        if kind == Kind::King {
            Run::default()
        } else if self.kind == Some(kind) {
            Run {
                kind: Some(kind),
                length: (self.length + 1).min(2),
            }
        } else {
            Run {
                kind: Some(kind),
                length: 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_periods_follow_rules_md() {
        let w = |n| control_period(Color::White, n).map(|p| (p.first, p.last));
        let b = |n| control_period(Color::Black, n).map(|p| (p.first, p.last));
        for n in 1..=10 {
            assert_eq!(w(n), Some((1, 10)));
            assert_eq!(b(n), Some((1, 10)));
        }
        assert_eq!(w(11), Some((11, 15)));
        assert_eq!(w(15), Some((11, 15)));
        assert_eq!(w(16), None);
        assert_eq!(w(20), None);
        assert_eq!(w(21), Some((21, 25)));
        assert_eq!(w(35), Some((31, 35)));
        assert_eq!(b(11), None);
        assert_eq!(b(15), None);
        assert_eq!(b(16), Some((16, 20)));
        assert_eq!(b(20), Some((16, 20)));
        assert_eq!(b(26), Some((26, 30)));
        assert_eq!(b(40), Some((36, 40)));
        assert_eq!(b(41), None);
    }

    #[test]
    fn runs_ban_the_third_move_of_a_kind() {
        let run = Run::default().after(Kind::Knight);
        assert_eq!(run.banned(), None);
        let run = run.after(Kind::Knight);
        assert_eq!(run.banned(), Some(Kind::Knight));
        assert_eq!(run.after(Kind::King), Run::default());
        assert_eq!(run.after(Kind::Pawn).banned(), None);
    }
}
