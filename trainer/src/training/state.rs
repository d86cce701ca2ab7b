//! The training side: the optimizer (SGD with momentum, or AdamW) written
//! over the net's tensors so that its state goes into checkpoints, the loss
//! (policy cross-entropy over legal moves plus win/draw/loss cross-entropy,
//! and the auxiliary heads' losses), and checkpoint files.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use engine::{check, non_negative, positive, within, EvalRequest, InvalidKey, Position};
use models::net::{Architecture, Net, MOVES_LEFT_UNIT};
use models::policy::POLICY_SIZE;
use models::server::encode_requests;
use models::weights;
use models::Precision;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::run_dir::Checkpoints;
use crate::training::replay::{Batch, CappedValue, Targets};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    Sgd,
    Adamw,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingConfig {
    pub batch_size: usize,
    pub optimizer: OptimizerKind,
    /// `[step, learning rate]` pairs: each rate holds from its step on.
    pub lr_schedule: Vec<(u64, f64)>,
    /// SGD momentum (AdamW's beta1).
    pub momentum: f64,
    pub weight_decay: f64,
    /// Weight of the value loss against the policy loss.
    pub value_weight: f64,
    /// Share of the value target taken from the root search value instead of
    /// the game result (lc0's q ratio): less noise from one game's outcome.
    pub value_q_share: f64,
    /// What a game stopped at the length cap teaches the value.
    pub capped_value: CappedValue,
    /// Weight of the material head's loss (mean squared error against the
    /// material balance `material_plies` later, squashed as tanh(pawns /
    /// `material_scale`)); needs `[net] material_head` (0 = off).
    pub material_weight: f64,
    pub material_plies: usize,
    pub material_scale: f64,
    /// Weight of the moves-left head's loss (Huber against the plies left,
    /// over games with a result); needs `[net] moves_left_head` (0 = off).
    pub moves_left_weight: f64,
    /// Weight of the reply head's loss (cross-entropy against the
    /// opponent's reply); needs `[net] reply_head` (0 = off).
    pub reply_weight: f64,
    /// Train half of the positions without castling rights mirrored left
    /// to right, where the rules are symmetric (AlphaGo's board symmetries,
    /// the one Chess-mix has): more distinct positions from the same games.
    pub mirror: bool,
    /// Samples in the replay window before training starts.
    pub min_samples: usize,
    /// Times each new sample is trained on, on average, at most.
    pub max_reuse: f64,
    /// Training steps between checkpoints (each becomes the self-play net).
    pub checkpoint_every: u64,
    /// Steps over which the learning rate ramps up linearly from near zero
    /// to the schedule's (0 = none): the first steps of a fresh net, with
    /// batch-norm statistics still settling, take no full-size steps.
    pub warmup_steps: u64,
    /// Number format of the forward and backward passes: `auto` is bf16 on a
    /// GPU and on a CPU with AMX tiles (weights and optimizer state stay
    /// fp32), fp32 on other CPUs.
    pub precision: Precision,
}

impl TrainingConfig {
    pub fn validate(&self) -> Result<(), InvalidKey> {
        check(self.batch_size >= 1, "batch_size", || {
            "must be at least 1".into()
        })?;
        let schedule = &self.lr_schedule;
        check(
            schedule.first().map(|p| p.0) == Some(0),
            "lr_schedule",
            || "must start with a [0, rate] pair".into(),
        )?;
        check(
            schedule.windows(2).all(|w| w[0].0 < w[1].0),
            "lr_schedule",
            || "steps must increase".into(),
        )?;
        check(
            schedule.iter().all(|&(_, lr)| lr > 0.0 && lr.is_finite()),
            "lr_schedule",
            || "rates must be positive".into(),
        )?;
        check((0.0..1.0).contains(&self.momentum), "momentum", || {
            format!("{} (expected 0 <= momentum < 1)", self.momentum)
        })?;
        non_negative("weight_decay", self.weight_decay)?;
        positive("value_weight", self.value_weight)?;
        within("value_q_share", self.value_q_share, 0.0, 1.0)?;
        non_negative("material_weight", self.material_weight)?;
        check(self.material_plies >= 1, "material_plies", || {
            "must be at least 1".into()
        })?;
        positive("material_scale", self.material_scale)?;
        non_negative("moves_left_weight", self.moves_left_weight)?;
        non_negative("reply_weight", self.reply_weight)?;
        positive("max_reuse", self.max_reuse)?;
        check(self.checkpoint_every >= 1, "checkpoint_every", || {
            "must be at least 1".into()
        })?;
        check(self.precision != Precision::Fp16, "precision", || {
            "\"fp16\" is not supported for training (it needs loss scaling); \
             use \"bf16\", \"fp32\" or \"auto\""
                .into()
        })
    }

    pub fn targets(&self) -> Targets {
        Targets {
            q_share: self.value_q_share as f32,
            capped_value: self.capped_value,
            material_plies: self.material_plies,
            material_scale: self.material_scale as f32,
            reply: self.reply_weight > 0.0,
            mirror: self.mirror,
        }
    }

    pub fn learning_rate(&self, step: u64) -> f64 {
        let scheduled = self
            .lr_schedule
            .iter()
            .take_while(|(from, _)| *from <= step)
            .last()
            .map_or(self.lr_schedule[0].1, |&(_, lr)| lr);
        let ramp = match self.warmup_steps {
            0 => 1.0,
            w => ((step + 1) as f64 / w as f64).min(1.0),
        };
        scheduled * ramp
    }
}

/// Losses and accuracies of one step.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct StepStats {
    pub policy_loss: f64,
    pub value_loss: f64,
    /// Share of samples whose most likely move is the most visited one.
    pub policy_accuracy: f64,
    /// Mean squared error of the expected score (win - loss).
    pub value_mse: f64,
    /// Standard deviation of the predicted score over the batch: near 0,
    /// the value head answers the same for every position (a dead head).
    pub value_spread: f64,
    /// The material head's mean squared error (0 without the head).
    pub material_loss: f64,
    /// The moves-left head's Huber loss, in units of [`MOVES_LEFT_UNIT`]
    /// plies (0 without the head).
    pub moves_left_loss: f64,
    /// The reply head's cross-entropy (0 without the head).
    pub reply_loss: f64,
    pub learning_rate: f64,
    /// The gradient's global L2 norm (before weight decay).
    pub grad_norm: f64,
    /// The loss or the gradient was not finite, so the step left the weights,
    /// the optimizer state and the batch-norm statistics as they were.
    pub skipped: bool,
}

/// Watches `value_spread` for a dead value head: one whose ReLUs have all
/// switched off, so that it answers the same for every position and the
/// search plays on the priors alone. Its channels then get no gradient
/// and do not come back (in a 4,000-step run their normalisation
/// parameters stood still from step 500 to the end).
#[derive(Debug, Default)]
pub struct ValueHeadWatch {
    /// Steps in a row with the spread below [`ValueHeadWatch::DEAD_SPREAD`].
    flat_steps: u64,
}

impl ValueHeadWatch {
    /// A live head's predicted scores spread by about 0.6 over a batch of
    /// the default run by step 400; a dead one answered within 0.01 of the
    /// same score for positions a queen up and a queen down.
    pub const DEAD_SPREAD: f64 = 0.02;
    /// Steps in a row the spread must stay that low: one flat batch (say,
    /// of drawn games) is not a dead head.
    pub const DEAD_STEPS: u64 = 300;

    /// True at the step that makes a flat run of steps count as a dead head
    /// (once: the run then only grows).
    pub fn observe(&mut self, stats: &StepStats) -> bool {
        self.flat_steps = match stats.value_spread < Self::DEAD_SPREAD {
            true => self.flat_steps + 1,
            false => 0,
        };
        self.flat_steps == Self::DEAD_STEPS
    }
}

/// Where the moves-left loss turns from squared to absolute error, in units
/// of [`MOVES_LEFT_UNIT`] plies: 10 plies. Game lengths have a long tail
/// (one blunder ends a game early, a shuffle drags it on), and a squared
/// error would let those few games steer the trunk (lc0 uses a Huber loss
/// for its moves-left head for the same reason).
const MOVES_LEFT_HUBER: f64 = 10.0 / MOVES_LEFT_UNIT;

/// What to do about a diverged run, for its error messages.
pub(crate) const DIVERGED_FIX: &str =
    "lower [training] lr_schedule (in the run's config.toml to resume it) or add warmup_steps";

/// Counters saved with each checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainProgress {
    pub checkpoint: u32,
    pub step: u64,
    /// Policy-target samples self-play had produced when this checkpoint was written.
    pub samples_seen: u64,
    pub games: u64,
    /// Seconds the run had trained, over all its sessions, when this
    /// checkpoint was written: what `mixzero rate` plots Elo against.
    /// `None` in runs begun before it was recorded.
    #[serde(default)]
    pub seconds: Option<f64>,
}

/// The net being trained and its optimizer state.
pub struct TrainState {
    /// The master weights, always fp32.
    pub net: Net,
    /// Trainable variables by name, sorted.
    params: Vec<(String, Tensor)>,
    /// With a lower precision, the copy of `net` in it that runs the passes,
    /// and its trainable variables in the order of `params`.
    compute: Option<(Net, Vec<Tensor>)>,
    first_moments: Vec<Tensor>,
    second_moments: Vec<Tensor>,
    pub progress: TrainProgress,
}

impl TrainState {
    pub fn new(net: Net) -> TrainState {
        let mut params: Vec<(String, Tensor)> = net
            .var_store()
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = || params.iter().map(|(_, t)| t.zeros_like()).collect();
        TrainState {
            first_moments: zeros(),
            second_moments: zeros(),
            params,
            compute: None,
            net,
            progress: TrainProgress {
                seconds: Some(0.0),
                ..TrainProgress::default()
            },
        }
    }

    /// Runs the forward and backward passes in `kind` (`BFloat16`) on a
    /// copy of the net, refreshed from the fp32 master weights at every step;
    /// the gradients update the master weights in fp32. `Float` trains the
    /// master net directly.
    pub fn set_compute_kind(&mut self, kind: Kind) -> Result<()> {
        if kind == Kind::Float {
            self.compute = None;
            return Ok(());
        }
        let mut copy =
            weights::from_bytes(&weights::to_bytes(&self.net), "master", self.net.device())?;
        copy.set_kind(kind);
        let variables = copy.var_store().variables();
        let params = self
            .params
            .iter()
            .map(|(name, _)| variables[name].shallow_clone())
            .collect();
        self.compute = Some((copy, params));
        Ok(())
    }

    pub fn arch(&self) -> Architecture {
        self.net.arch()
    }

    /// One optimizer step on `batch`.
    pub fn step(&mut self, batch: &Batch, config: &TrainingConfig) -> StepStats {
        let device = self.net.device();
        let n = batch.n as i64;
        let upload =
            |data: &[f32], shape: &[i64]| Tensor::from_slice(data).view(shape).to_device(device);
        let xs = upload(&batch.inputs, &self.net.arch().encoder.input_shape(batch.n));
        let target_policy = upload(&batch.policy, &[n, POLICY_SIZE as i64]);
        let legal = upload(&batch.legal, &[n, POLICY_SIZE as i64]);
        let target_wdl = upload(&batch.wdl, &[n, 3]);
        let value_mask = upload(&batch.value_mask, &[n]);
        let result_mask = upload(&batch.result_mask, &[n]);
        let target_material = upload(&batch.material, &[n]);
        let target_moves_left = upload(&batch.moves_left, &[n]);

        // The batch-norm statistics a training-mode pass updates in place,
        // kept to put back if the step is skipped: one overflowing batch
        // would otherwise leave them infinite for every later pass.
        let statistics: Vec<(Tensor, Tensor)> = match &self.compute {
            Some(_) => Vec::new(),
            None => tch::no_grad(|| {
                self.net
                    .var_store()
                    .variables()
                    .into_values()
                    .filter(|t| !t.requires_grad())
                    .map(|t| {
                        let kept = t.copy();
                        (t, kept)
                    })
                    .collect()
            }),
        };
        let heads = match &mut self.compute {
            Some((copy, _)) => {
                copy.var_store_mut()
                    .copy(self.net.var_store())
                    .expect("the compute copy has the master's variables");
                copy.forward_heads(&xs, true)
            }
            None => self.net.forward_heads(&xs, true),
        };
        // Illegal moves get no probability, as at inference time.
        let masked = heads.policy + (&legal - 1.0) * 1e4;
        let log_policy = masked.log_softmax(-1, Kind::Float);
        let row_sum = |t: Tensor| t.sum_dim_intlist(&[1i64][..], false, Kind::Float);
        let policy_loss = -row_sum(&target_policy * &log_policy).mean(Kind::Float);
        // Only games with a result (or a capped value) teach the value.
        let log_wdl = heads.value.log_softmax(-1, Kind::Float);
        let known = value_mask.sum(Kind::Float).clamp_min(1.0);
        let value_loss = -(row_sum(&target_wdl * &log_wdl) * &value_mask).sum(Kind::Float) / &known;
        let mut loss = &policy_loss + &value_loss * config.value_weight;
        let material_loss = match (&heads.material, config.material_weight > 0.0) {
            (Some(predicted), true) => {
                let mse = (predicted.to_kind(Kind::Float) - &target_material)
                    .square()
                    .mean(Kind::Float);
                loss += &mse * config.material_weight;
                Some(mse)
            }
            _ => None,
        };
        // Games stopped at the length cap have no end to count to.
        let moves_left_loss = match (&heads.moves_left, config.moves_left_weight > 0.0) {
            (Some(predicted), true) => {
                // smooth_l1 is Huber divided by its threshold: absolute error
                // beyond 10 plies, so its gradient stays within 1.
                let huber = predicted.to_kind(Kind::Float).smooth_l1_loss(
                    &target_moves_left,
                    tch::Reduction::None,
                    MOVES_LEFT_HUBER,
                );
                let with_result = result_mask.sum(Kind::Float).clamp_min(1.0);
                let mean = (huber * &result_mask).sum(Kind::Float) / with_result;
                loss += &mean * config.moves_left_weight;
                Some(mean)
            }
            _ => None,
        };
        // A softmax over the whole policy map, without the legal-move mask
        // of the policy loss: the batch carries no second mask, and learning
        // where the opponent's pieces can go is itself shaping for the trunk.
        // Batches carry reply targets when the weight asks for them
        // (`Targets::reply`); one built without teaches the head nothing.
        let train_reply = config.reply_weight > 0.0 && !batch.reply.is_empty();
        let reply_loss = match (&heads.reply, train_reply) {
            (Some(logits), true) => {
                let target = upload(&batch.reply, &[n, POLICY_SIZE as i64]);
                let mask = upload(&batch.reply_mask, &[n]);
                let log_reply = logits.log_softmax(-1, Kind::Float);
                let replies = mask.sum(Kind::Float).clamp_min(1.0);
                let ce = -(row_sum(&target * &log_reply) * &mask).sum(Kind::Float) / replies;
                loss += &ce * config.reply_weight;
                Some(ce)
            }
            _ => None,
        };

        let grads: Vec<Tensor> = match &mut self.compute {
            Some((_, params)) => {
                for p in params.iter_mut() {
                    p.zero_grad();
                }
                loss.backward();
                params
                    .iter()
                    .map(|p| p.grad().to_kind(Kind::Float))
                    .collect()
            }
            None => {
                for (_, p) in &mut self.params {
                    p.zero_grad();
                }
                loss.backward();
                self.params.iter().map(|(_, p)| p.grad()).collect()
            }
        };
        let grad_norm = tch::no_grad(|| {
            grads
                .iter()
                .filter(|g| g.defined())
                .map(|g| g.square().sum(Kind::Float))
                .fold(Tensor::from(0f32), |total, s| total + s)
                .sqrt()
                .double_value(&[])
        });
        let skipped = !(loss.double_value(&[]).is_finite() && grad_norm.is_finite());
        let lr = config.learning_rate(self.progress.step);
        if skipped {
            tch::no_grad(|| {
                for (mut live, kept) in statistics {
                    live.copy_(&kept);
                }
            });
        } else {
            if let Some((copy, _)) = &self.compute {
                // The batch-norm statistics the pass updated, back to the
                // master. They pass through bf16 at every step, so an update
                // smaller than half a bf16 step (0.4% of the value) is lost:
                // the statistics settle within about 4% of the batches'
                // (momentum 0.1), well inside what bf16 inference rounds away.
                let master = self.net.var_store().variables();
                tch::no_grad(|| {
                    for (name, t) in copy.var_store().variables() {
                        if !t.requires_grad() {
                            let mut to = master[&name].shallow_clone();
                            to.copy_(&t);
                        }
                    }
                });
            }
            self.apply_gradients(&grads, config, lr);
        }
        // A skipped step still spends its batch and counts, so that the
        // step count stays the number of batches drawn.
        self.progress.step += 1;

        tch::no_grad(|| {
            let hits = log_policy
                .argmax(1, false)
                .eq_tensor(&target_policy.argmax(1, false))
                .to_kind(Kind::Float)
                .mean(Kind::Float);
            let probs = log_wdl.exp();
            let score = |t: &Tensor| t.narrow(1, 0, 1) - t.narrow(1, 2, 1);
            let predicted = score(&probs);
            let mse = ((&predicted - score(&target_wdl)).square().view([-1]) * &value_mask)
                .sum(Kind::Float)
                / &known;
            let spread = predicted.std(true);
            StepStats {
                policy_loss: policy_loss.double_value(&[]),
                value_loss: value_loss.double_value(&[]),
                policy_accuracy: hits.double_value(&[]),
                value_mse: mse.double_value(&[]),
                value_spread: spread.double_value(&[]),
                material_loss: material_loss.map_or(0.0, |m| m.double_value(&[])),
                moves_left_loss: moves_left_loss.map_or(0.0, |m| m.double_value(&[])),
                reply_loss: reply_loss.map_or(0.0, |r| r.double_value(&[])),
                learning_rate: lr,
                grad_norm,
                skipped,
            }
        })
    }

    /// One optimizer update of the master weights; `grads` in `params` order.
    fn apply_gradients(&mut self, grads: &[Tensor], config: &TrainingConfig, lr: f64) {
        let t = (self.progress.step + 1) as f64;
        tch::no_grad(|| {
            for (i, ((_, p), grad)) in self.params.iter_mut().zip(grads).enumerate() {
                if !grad.defined() {
                    continue;
                }
                let grad = grad.shallow_clone();
                // Decay the weights of convolutions and linear layers, not norms and biases.
                let decay = if p.dim() > 1 {
                    config.weight_decay
                } else {
                    0.0
                };
                match config.optimizer {
                    OptimizerKind::Sgd => {
                        let g = if decay > 0.0 {
                            &grad + &*p * decay
                        } else {
                            grad
                        };
                        let m = &mut self.first_moments[i];
                        let _ = m.g_mul_scalar_(config.momentum).g_add_(&g);
                        let _ = p.g_sub_(&(&*m * lr));
                    }
                    OptimizerKind::Adamw => {
                        let (b1, b2, eps) = (config.momentum, 0.999, 1e-8);
                        let m = &mut self.first_moments[i];
                        let _ = m.g_mul_scalar_(b1).g_add_(&(&grad * (1.0 - b1)));
                        let v = &mut self.second_moments[i];
                        let _ = v.g_mul_scalar_(b2).g_add_(&(grad.square() * (1.0 - b2)));
                        let m_hat = &self.first_moments[i] / (1.0 - b1.powf(t));
                        let v_hat = &self.second_moments[i] / (1.0 - b2.powf(t));
                        let update = m_hat / (v_hat.sqrt() + eps) + &*p * decay;
                        let _ = p.g_sub_(&(update * lr));
                    }
                }
            }
        });
    }

    /// Writes the checkpoint's weights (the net alone, what engines load)
    /// and its optimizer state and counters, then points `latest` at them;
    /// each file atomically, `latest` last.
    pub fn save_checkpoint(&self, checkpoints: &Checkpoints) -> Result<PathBuf> {
        let n = self.progress.checkpoint;
        self.check_finite().with_context(|| {
            format!(
                "training diverged by step {}: checkpoint {n} not written (the last one \
                 written stays `latest`); {DIVERGED_FIX}",
                self.progress.step
            )
        })?;
        let weights_path = checkpoints.weights(n);
        weights::save(&self.net, &weights_path)?;
        let state_path = checkpoints.state(n);
        weights::write_atomically(&state_path, &self.state_bytes()?)
            .with_context(|| format!("writing {}", state_path.display()))?;
        checkpoints.set_latest(n)?;
        Ok(weights_path)
    }

    /// Errors unless every weight and batch-norm statistic is finite and
    /// the net, as inference runs it, answers the start position with
    /// finite outputs. Skipped steps keep non-finite updates out, but a
    /// finite update can still grow the weights until inference overflows:
    /// batch norm hides that from the training passes, which normalise by
    /// the batch's own statistics, and not from inference, which uses the
    /// running ones.
    fn check_finite(&self) -> Result<()> {
        let finite = |t: &Tensor| t.isfinite().all().int64_value(&[]) == 1;
        let mut variables: Vec<_> = self.net.var_store().variables().into_iter().collect();
        variables.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some((name, _)) = variables.iter().find(|(_, t)| !finite(t)) {
            bail!("the network's {name} is not finite");
        }
        let encoder = self.net.arch().encoder;
        let start = Position::start();
        let moves = start.legal_moves();
        let history = [start];
        let input = encode_requests(&encoder, &[EvalRequest::new(&history, &moves)])?;
        let xs = Tensor::from_slice(&input.planes)
            .view(encoder.input_shape(1))
            .to_device(self.net.device());
        let heads = tch::no_grad(|| self.net.forward_heads(&xs, false));
        for (head, t) in [("policy", &heads.policy), ("value", &heads.value)] {
            if !finite(t) {
                bail!("the network's {head} for the start position is not finite");
            }
        }
        Ok(())
    }

    fn state_bytes(&self) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        for (i, (name, _)) in self.params.iter().enumerate() {
            for (prefix, tensor) in [
                ("m1", &self.first_moments[i]),
                ("m2", &self.second_moments[i]),
            ] {
                let t = tensor
                    .to_device(Device::Cpu)
                    .to_kind(Kind::Float)
                    .contiguous();
                let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
                let mut values = vec![0f32; t.numel()];
                t.copy_data(&mut values, t.numel());
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                data.push((format!("{prefix}/{name}"), shape, bytes));
            }
        }
        let views = data
            .iter()
            .map(|(n, s, b)| Ok((n.clone(), TensorView::new(Dtype::F32, s.clone(), b)?)))
            .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
        let meta = HashMap::from([(
            "progress".to_string(),
            serde_json::to_string(&self.progress)?,
        )]);
        Ok(safetensors::serialize(views, Some(meta))?)
    }

    /// Loads checkpoint `n` onto `device`.
    pub fn load_checkpoint(
        checkpoints: &Checkpoints,
        n: u32,
        device: Device,
    ) -> Result<TrainState> {
        let weights_path = checkpoints.weights(n);
        let net = weights::load(&weights_path, device)?;
        let mut state = TrainState::new(net);
        let state_path = checkpoints.state(n);
        let bytes = std::fs::read(&state_path)
            .with_context(|| format!("reading {}", state_path.display()))?;
        let what = || format!("optimizer state {}", state_path.display());
        let tensors = SafeTensors::deserialize(&bytes).with_context(what)?;
        state.progress = progress_of(&bytes).with_context(what)?;
        for (i, (name, param)) in state.params.iter().enumerate() {
            for (prefix, slot) in [
                ("m1", &mut state.first_moments[i]),
                ("m2", &mut state.second_moments[i]),
            ] {
                let key = format!("{prefix}/{name}");
                let view = tensors
                    .tensor(&key)
                    .with_context(|| format!("{}: missing {key}", what()))?;
                let expected: Vec<usize> = param.size().iter().map(|&d| d as usize).collect();
                if view.dtype() != Dtype::F32 || view.shape() != expected {
                    bail!(
                        "{}: {key} has shape {:?}, expected {expected:?}",
                        what(),
                        view.shape()
                    );
                }
                let values: Vec<f32> = view
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                *slot = Tensor::from_slice(&values)
                    .view(param.size().as_slice())
                    .to_device(device);
            }
        }
        Ok(state)
    }
}

/// The counters saved with checkpoint `n`, without loading its tensors.
pub fn read_progress(checkpoints: &Checkpoints, n: u32) -> Result<TrainProgress> {
    let path = checkpoints.state(n);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    progress_of(&bytes).with_context(|| format!("optimizer state {}", path.display()))
}

/// The counters in an optimizer state file's metadata.
fn progress_of(state_file: &[u8]) -> Result<TrainProgress> {
    let (_, meta) = SafeTensors::read_metadata(state_file)?;
    let progress = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get("progress"))
        .context("no progress metadata")?;
    Ok(serde_json::from_str(progress)?)
}

/// A new run's state of a one-block net, for tests of checkpoint files.
#[cfg(test)]
pub(crate) fn tiny_state() -> TrainState {
    let arch = Architecture {
        net: models::net::NetConfig::new(1, 8),
        encoder: models::encoding::EncoderConfig::default(),
    };
    TrainState::new(Net::new(arch, Device::Cpu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::encoding::EncoderConfig;
    use models::net::NetConfig;

    fn config() -> TrainingConfig {
        let config: crate::config::Config = crate::config::Config::default_config();
        TrainingConfig {
            lr_schedule: vec![(0, 0.02)],
            ..config.training
        }
    }

    /// A fixed batch: random 0/1 planes, 20 legal moves a position, one of
    /// them the target, a win/draw/loss target, and targets for every
    /// auxiliary head.
    fn batch(arch: Architecture, n: usize) -> Batch {
        let input_len = arch.encoder.input_len();
        let noise = Tensor::rand([(n * input_len) as i64], (Kind::Float, Device::Cpu)).round();
        let mut inputs = vec![0f32; n * input_len];
        noise.copy_data(&mut inputs, n * input_len);
        let (mut policy, mut legal, mut wdl) = (
            vec![0f32; n * POLICY_SIZE],
            vec![0f32; n * POLICY_SIZE],
            vec![0f32; n * 3],
        );
        for i in 0..n {
            for m in 0..20 {
                legal[i * POLICY_SIZE + (i * 37 + m * 101) % POLICY_SIZE] = 1.0;
            }
            policy[i * POLICY_SIZE + (i * 37 + (i % 20) * 101) % POLICY_SIZE] = 1.0;
            wdl[i * 3 + i % 3] = 1.0;
        }
        Batch {
            inputs,
            policy,
            legal,
            wdl,
            value_mask: (0..n).map(|i| (i % 4 != 0) as u8 as f32).collect(),
            result_mask: (0..n).map(|i| (i % 3 != 0) as u8 as f32).collect(),
            material: (0..n).map(|i| (i as f32 / n as f32) - 0.5).collect(),
            moves_left: (0..n).map(|i| (i % 7) as f32 * 0.3).collect(),
            reply: (0..n * POLICY_SIZE)
                .map(|at| (at % POLICY_SIZE == (at / POLICY_SIZE * 53) % POLICY_SIZE) as u8 as f32)
                .collect(),
            reply_mask: (0..n).map(|i| (i % 5 != 0) as u8 as f32).collect(),
            n,
            mirrorable: 0,
        }
    }

    #[test]
    fn a_flat_value_is_reported_once_and_a_spread_resets_the_count() {
        let stats = |value_spread| StepStats {
            value_spread,
            ..StepStats::default()
        };
        let mut watch = ValueHeadWatch::default();
        let mut reports = 0;
        for step in 0..ValueHeadWatch::DEAD_STEPS * 3 {
            // A live spread now and then keeps it from counting.
            let spread = if step % 100 == 99 { 0.5 } else { 0.001 };
            reports += watch.observe(&stats(spread)) as u32;
        }
        assert_eq!(reports, 0);
        for _ in 0..ValueHeadWatch::DEAD_STEPS * 3 {
            reports += watch.observe(&stats(0.001)) as u32;
        }
        assert_eq!(reports, 1);
    }

    #[test]
    fn auxiliary_losses_fall_and_skip_masked_samples() {
        let arch = Architecture {
            net: NetConfig {
                moves_left_head: true,
                reply_head: true,
                ..NetConfig::new(1, 16)
            },
            encoder: EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
        };
        tch::manual_seed(10);
        let batch = batch(arch, 16);
        let config = TrainingConfig {
            moves_left_weight: 1.0,
            reply_weight: 1.0,
            ..config()
        };
        let mut state = TrainState::new(Net::new(arch, Device::Cpu));
        let first = state.step(&batch, &config);
        let mut last = first;
        for _ in 0..40 {
            last = state.step(&batch, &config);
        }
        eprintln!(
            "moves left {:.3} -> {:.3}, reply {:.3} -> {:.3}",
            first.moves_left_loss, last.moves_left_loss, first.reply_loss, last.reply_loss
        );
        assert!(last.moves_left_loss < 0.5 * first.moves_left_loss);
        assert!(last.reply_loss < 0.5 * first.reply_loss);

        // Nothing to learn where every sample is masked.
        let masked = Batch {
            value_mask: vec![0.0; 16],
            result_mask: vec![0.0; 16],
            reply_mask: vec![0.0; 16],
            ..batch.clone()
        };
        let stats = state.step(&masked, &config);
        assert_eq!((stats.moves_left_loss, stats.reply_loss), (0.0, 0.0));
        assert!(stats.policy_loss > 0.0);
        // A weight of 0 leaves a head untrained, its loss unreported.
        let off = TrainingConfig {
            moves_left_weight: 0.0,
            reply_weight: 0.0,
            ..config
        };
        let stats = state.step(&batch, &off);
        assert_eq!((stats.moves_left_loss, stats.reply_loss), (0.0, 0.0));
    }

    #[test]
    fn counters_survive_a_checkpoint_and_older_ones_load_without_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path());
        let mut state = tiny_state();
        assert_eq!(state.progress.seconds, Some(0.0));
        state.progress = TrainProgress {
            checkpoint: 3,
            step: 40,
            samples_seen: 500,
            games: 7,
            seconds: Some(1800.5),
        };
        state.save_checkpoint(&checkpoints).unwrap();
        let loaded = TrainState::load_checkpoint(&checkpoints, 3, Device::Cpu).unwrap();
        assert_eq!(loaded.progress, state.progress);
        assert_eq!(read_progress(&checkpoints, 3).unwrap(), state.progress);
        let older: TrainProgress =
            serde_json::from_str(r#"{"checkpoint":3,"step":40,"samples_seen":500,"games":7}"#)
                .unwrap();
        assert_eq!(older.seconds, None);
    }

    #[test]
    fn bf16_passes_train_like_fp32() {
        let arch = Architecture {
            net: NetConfig {
                material_head: true,
                moves_left_head: true,
                reply_head: true,
                ..NetConfig::new(2, 16)
            },
            encoder: EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
        };
        tch::manual_seed(9);
        let batch = batch(arch, 32);
        let net = Net::new(arch, Device::Cpu);
        let bytes = weights::to_bytes(&net);
        let config = TrainingConfig {
            moves_left_weight: 0.25,
            reply_weight: 0.15,
            ..config()
        };
        let mut losses = Vec::new();
        for kind in [Kind::Float, Kind::BFloat16] {
            let mut state =
                TrainState::new(weights::from_bytes(&bytes, "test", Device::Cpu).unwrap());
            state.set_compute_kind(kind).unwrap();
            let first = state.step(&batch, &config);
            let mut last = first;
            for _ in 0..40 {
                last = state.step(&batch, &config);
            }
            // The master weights and the optimizer state stay fp32.
            assert_eq!(state.net.kind(), Kind::Float);
            assert!(state.params.iter().all(|(_, p)| p.kind() == Kind::Float));
            assert!(last.material_loss < first.material_loss, "{kind:?}");
            assert!(last.moves_left_loss < first.moves_left_loss, "{kind:?}");
            assert!(last.reply_loss < first.reply_loss, "{kind:?}");
            let total = |s: StepStats| s.policy_loss + s.value_loss + s.material_loss;
            eprintln!("{kind:?}: loss {:.3} -> {:.3}", total(first), total(last));
            losses.push((total(first), total(last)));
        }
        let ((fp32_first, fp32_last), (bf16_first, bf16_last)) = (losses[0], losses[1]);
        // Same weights, same batch: the first losses differ only by rounding.
        assert!((fp32_first - bf16_first).abs() < 0.05 * fp32_first);
        assert!(fp32_last < 0.5 * fp32_first, "fp32 did not learn the batch");
        assert!(bf16_last < 0.5 * bf16_first, "bf16 did not learn the batch");
        assert!((bf16_last - fp32_last).abs() < 0.25 * fp32_first);
    }

    #[test]
    fn a_non_finite_batch_is_skipped_and_changes_nothing() {
        let arch = Architecture {
            net: NetConfig::new(1, 8),
            encoder: EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
        };
        tch::manual_seed(11);
        let good = batch(arch, 8);
        let mut poisoned = good.clone();
        poisoned.inputs[3] = f32::NAN;
        for kind in [Kind::Float, Kind::BFloat16] {
            let mut state = TrainState::new(Net::new(arch, Device::Cpu));
            state.set_compute_kind(kind).unwrap();
            let stats = state.step(&good, &config());
            assert!(!stats.skipped && stats.grad_norm.is_finite() && stats.grad_norm > 0.0);
            let before: HashMap<String, Tensor> = state
                .net
                .var_store()
                .variables()
                .into_iter()
                .map(|(name, t)| (name, t.copy()))
                .collect();
            let moments: Vec<Tensor> = state.first_moments.iter().map(Tensor::copy).collect();
            let stats = state.step(&poisoned, &config());
            assert!(stats.skipped, "{kind:?}");
            assert!(!stats.policy_loss.is_finite() || !stats.grad_norm.is_finite());
            // Weights, batch-norm statistics and optimizer state as they were;
            // only the step count moves on.
            for (name, t) in state.net.var_store().variables() {
                assert!(t.equal(&before[&name]), "{kind:?}: {name} changed");
            }
            assert_eq!(state.progress.step, 2);
            for (i, m) in state.first_moments.iter().enumerate() {
                assert!(m.equal(&moments[i]), "{kind:?}: momentum {i} changed");
            }
        }
    }

    #[test]
    fn warmup_ramps_the_learning_rate() {
        let config = TrainingConfig {
            warmup_steps: 4,
            lr_schedule: vec![(0, 0.1), (10, 0.01)],
            ..config()
        };
        let rates: Vec<f64> = [0, 1, 3, 4, 9, 10]
            .map(|s| config.learning_rate(s))
            .to_vec();
        let expected = [0.025, 0.05, 0.1, 0.1, 0.1, 0.01];
        for (r, e) in rates.iter().zip(expected) {
            assert!((r - e).abs() < 1e-12, "{rates:?}");
        }
        let fp16 = TrainingConfig {
            precision: Precision::Fp16,
            ..config
        };
        let err = fp16.validate().unwrap_err();
        assert_eq!(err.key, "precision");
        assert!(err.why.contains("fp16"));
    }
}
