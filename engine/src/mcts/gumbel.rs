//! Gumbel root search (Danihelka et al., "Policy improvement by planning
//! with Gumbel", ICLR 2022), the parts that do not touch the tree: the
//! sequential-halving schedule and the transform of root values into
//! logits. [`super::Search`] applies them at the root; below the root the
//! search stays PUCT.
//!
//! The root samples up to `m` moves without replacement by Gumbel-top-k
//! (the largest `g + logit`), then halves them in rounds, each round giving
//! every remaining move the same number of visits and keeping the half with
//! the largest `g + logit + sigma(q)`. The move played is the survivor with
//! the largest score, and the policy target is `softmax(logit +
//! sigma(completed q))` over every legal move: an improvement of the
//! network's policy even when a few playouts face 50-80 legal moves, where
//! visit counts mostly echo the priors.

/// Visits a root move must have had in this search for simulation `k` to
/// go to it, with `m` moves considered and `planned` simulations planned:
/// the k-th entry of mctx's `get_sequence_of_considered_visits(m, planned)`,
/// continued past `planned` by the last two moves taking turns, so that a
/// search may run longer than planned.
pub(super) fn considered_visit(m: usize, planned: u32, k: u32) -> u32 {
    if m <= 1 {
        return k;
    }
    let rounds = (m as f64).log2().ceil() as u32;
    let mut considered = m as u32;
    let mut start = 0u32;
    let mut visits = 0u32;
    loop {
        if considered == 2 {
            // Every later round is two moves taking turns.
            return visits + (k - start) / 2;
        }
        let extra = (planned / (rounds * considered)).max(1);
        let block = extra * considered;
        if k < start + block {
            return visits + (k - start) / considered;
        }
        start += block;
        visits += extra;
        considered = (considered / 2).max(2);
    }
}

/// Simulations planned when a search is not told its budget (a search
/// under a clock): enough for every round of halving `m` moves to visit
/// each survivor at least twice.
pub(super) fn default_plan(m: usize) -> u32 {
    let rounds = (m.max(2) as f64).log2().ceil() as u32;
    2 * m.max(2) as u32 * rounds
}

/// A Gumbel(0, 1) draw from a uniform one in [0, 1).
pub(super) fn gumbel(uniform: f64) -> f32 {
    // Kept off 0 so that neither logarithm is infinite.
    let u = uniform.clamp(1e-12, 1.0 - 1e-12);
    -(-u.ln()).ln() as f32
}

/// Logit of a prior; a zero prior (a move the win check ruled out) gets a
/// large finite negative logit, so sums and softmaxes stay finite.
pub(super) fn logit(prior: f32) -> f32 {
    prior.max(1e-20).ln()
}

/// One child's statistics for [`root_values`], values for the root's side to move.
pub(super) struct ChildView {
    pub prior: f32,
    pub visits: u32,
    /// Mean value over its visits (ignored with none).
    pub q: f32,
}

/// `sigma(completed q)` of each child: each unvisited child's q completed
/// with the mixed value (the network's value of the root blended with the
/// prior-weighted q of the visited children, weighted by their visits),
/// then rescaled to [0, 1] over the children and scaled by
/// `(c_visit + max visits) * c_scale`.
pub(super) fn sigma(
    children: &[ChildView],
    root_value: f32,
    c_visit: f32,
    c_scale: f32,
) -> Vec<f32> {
    let visits: u32 = children.iter().map(|c| c.visits).sum();
    let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
    let visited = children.iter().filter(|c| c.visits > 0);
    let visited_prior: f32 = visited.clone().map(|c| c.prior).sum();
    let mixed = if visits == 0 {
        root_value
    } else {
        let weighted_q = if visited_prior > 0.0 {
            visited.map(|c| c.prior * c.q).sum::<f32>() / visited_prior
        } else {
            let count = visited.clone().count() as f32;
            visited.map(|c| c.q).sum::<f32>() / count
        };
        (root_value + visits as f32 * weighted_q) / (1.0 + visits as f32)
    };
    let completed: Vec<f32> = children
        .iter()
        .map(|c| if c.visits > 0 { c.q } else { mixed })
        .collect();
    let low = completed.iter().copied().fold(f32::INFINITY, f32::min);
    let high = completed.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let range = (high - low).max(1e-8);
    let scale = (c_visit + max_visits as f32) * c_scale;
    completed
        .iter()
        .map(|q| scale * (q - low) / range)
        .collect()
}

/// `softmax(logits)`.
pub(super) fn softmax(logits: &[f32]) -> Vec<f32> {
    let high = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|l| (l - high).exp()).collect();
    let total: f32 = exp.iter().sum();
    exp.iter().map(|e| e / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(m: usize, planned: u32) -> Vec<u32> {
        (0..planned)
            .map(|k| considered_visit(m, planned, k))
            .collect()
    }

    #[test]
    fn the_schedule_halves_as_mctx_does() {
        // mctx: get_sequence_of_considered_visits(4, 8) and (16, 48).
        assert_eq!(sequence(4, 8), [0, 0, 0, 0, 1, 1, 2, 2]);
        let seq = sequence(16, 48);
        assert_eq!(&seq[..16], &[0; 16]);
        assert_eq!(&seq[16..24], &[1; 8]);
        assert_eq!(&seq[24..36], &[2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4]);
        assert_eq!(&seq[36..], &[5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10]);
        // One move: every simulation goes to it.
        assert_eq!(sequence(1, 3), [0, 1, 2]);
        // Fewer simulations than moves: the first round is cut short.
        assert_eq!(sequence(16, 12), [0; 12]);
    }

    #[test]
    fn past_the_plan_the_last_two_take_turns() {
        let planned = 8;
        let tail: Vec<u32> = (8..14).map(|k| considered_visit(4, planned, k)).collect();
        assert_eq!(tail, [3, 3, 4, 4, 5, 5]);
    }

    #[test]
    fn unvisited_children_get_the_mixed_value() {
        let child = |prior, visits, q| ChildView { prior, visits, q };
        let children = [
            child(0.5, 3, 0.6),
            child(0.25, 1, -0.2),
            child(0.25, 0, 0.0),
        ];
        let sigma = sigma(&children, 0.1, 50.0, 0.1);
        // mixed = (0.1 + 4 * (0.5 * 0.6 + 0.25 * -0.2) / 0.75) / 5 = 0.2867
        let scale = (50.0 + 3.0) * 0.1;
        let expect = |q: f32| scale * (q - -0.2) / 0.8;
        for (got, want) in sigma.iter().zip([expect(0.6), 0.0, expect(0.28667)]) {
            assert!((got - want).abs() < 1e-3, "{got} vs {want}");
        }
    }

    #[test]
    fn equal_values_add_nothing() {
        let children: Vec<ChildView> = (0..3)
            .map(|_| ChildView {
                prior: 1.0 / 3.0,
                visits: 0,
                q: 0.0,
            })
            .collect();
        assert_eq!(sigma(&children, 0.3, 50.0, 1.0), [0.0; 3]);
    }

    #[test]
    fn gumbel_draws_are_finite() {
        for u in [0.0, 1e-300, 0.5, 1.0 - 1e-16, 1.0] {
            assert!(gumbel(u).is_finite(), "{u}");
        }
        assert!(logit(0.0).is_finite());
        let p = softmax(&[1.0, 1.0, logit(0.0)]);
        assert!((p[0] - 0.5).abs() < 1e-6 && p[2] < 1e-6);
    }
}
