//! The residual network: a tower of residual blocks (optionally with
//! squeeze-excitation), a policy head over the 8,900-move space and a
//! win/draw/loss value head, and optional auxiliary heads that only training
//! reads (material, moves left, the opponent's reply). Built in the style of
//! tch-rs's `vision/resnet.rs`.

use serde::{Deserialize, Serialize};
use tch::nn::{self, ModuleT};
use tch::{Device, Kind, Tensor};

use crate::encoding::EncoderConfig;
use crate::policy::MOVE_TYPES;

const BOARD: i64 = 10;

/// Size and shape of the network. The serde defaults serve weights files
/// written before a key existed; a config file takes every missing key from
/// the embedded `configs/default.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    /// Residual blocks in the tower.
    pub blocks: usize,
    /// Channels of every tower convolution.
    pub channels: usize,
    /// Squeeze-excitation in each block (0 = none; else the channel reduction ratio).
    #[serde(default)]
    pub se_ratio: usize,
    /// Channels of the value head's 1x1 convolution.
    #[serde(default = "default_value_channels")]
    pub value_channels: usize,
    /// Hidden units of the value head.
    #[serde(default = "default_value_hidden")]
    pub value_hidden: usize,
    /// An auxiliary head predicting the material balance a few plies later
    /// (training only: it shapes the trunk, the search never sees it).
    #[serde(default)]
    pub material_head: bool,
    /// An auxiliary head predicting the plies left until the game ends, in
    /// units of [`MOVES_LEFT_UNIT`] (lc0's moves-left head: the search's
    /// moves-left utility reads it).
    #[serde(default)]
    pub moves_left_head: bool,
    /// An auxiliary second policy head predicting the opponent's reply
    /// (KataGo's opponent policy; training only).
    #[serde(default)]
    pub reply_head: bool,
}

/// Channels of the material head's 1x1 convolution.
const MATERIAL_CHANNELS: i64 = 8;

/// Channels of the moves-left head's 1x1 convolution.
const MOVES_LEFT_CHANNELS: i64 = 8;

/// Plies that one unit of the moves-left head stands for: games last tens to
/// hundreds of plies, so the head's output and its loss stay near 1 instead
/// of in the hundreds.
pub const MOVES_LEFT_UNIT: f64 = 100.0;

fn default_value_channels() -> usize {
    32
}

fn default_value_hidden() -> usize {
    128
}

impl NetConfig {
    pub fn new(blocks: usize, channels: usize) -> NetConfig {
        NetConfig {
            blocks,
            channels,
            se_ratio: 0,
            value_channels: default_value_channels(),
            value_hidden: default_value_hidden(),
            material_head: false,
            moves_left_head: false,
            reply_head: false,
        }
    }

    /// Short name such as `6x64` or `10x128se`.
    pub fn name(&self) -> String {
        let se = if self.se_ratio > 0 { "se" } else { "" };
        format!("{}x{}{se}", self.blocks, self.channels)
    }

    pub fn validate(&self) -> Result<(), engine::InvalidKey> {
        use engine::{check, within};
        within("blocks", self.blocks, 1, 64)?;
        within("channels", self.channels, 1, 1024)?;
        check(
            self.se_ratio == 0 || self.channels / self.se_ratio > 0,
            "se_ratio",
            || {
                format!(
                    "{} leaves no channels out of {}",
                    self.se_ratio, self.channels
                )
            },
        )?;
        within("value_channels", self.value_channels, 1, 1024)?;
        check(
            (1..=65_536).contains(&self.value_hidden),
            "value_hidden",
            || format!("{} (expected 1..=65536)", self.value_hidden),
        )
    }
}

/// Everything needed to rebuild a network from its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    pub net: NetConfig,
    pub encoder: EncoderConfig,
}

impl Architecture {
    /// `(section.key, ours, theirs)` for every key whose value differs from
    /// `other`'s, for errors about a net that does not fit a config.
    pub fn differences(&self, other: &Architecture) -> Vec<(String, String, String)> {
        let ours = serde_json::to_value(self).expect("an architecture serialises");
        let theirs = serde_json::to_value(other).expect("an architecture serialises");
        let mut found = Vec::new();
        for (section, fields) in ours.as_object().into_iter().flatten() {
            for (key, value) in fields.as_object().into_iter().flatten() {
                let other = &theirs[section][key];
                if value != other {
                    found.push((
                        format!("{section}.{key}"),
                        value.to_string(),
                        other.to_string(),
                    ));
                }
            }
        }
        found
    }

    /// Arithmetic of one position's forward pass, a multiply-add counted as
    /// two operations, over every convolution and linear layer of
    /// [`Net::new`] (batch norms, activations and biases are a rounding
    /// error next to them).
    pub fn forward_flops(&self) -> u64 {
        self.layers().iter().map(|l| 2 * l.multiply_adds()).sum()
    }

    /// Trainable parameters, from the same layer walk as [`Self::forward_flops`]
    /// (which the tests hold to the built net's count).
    pub fn parameter_count(&self) -> u64 {
        self.layers().iter().map(Layer::parameters).sum()
    }

    /// The convolutions and linear layers of the net, in order.
    fn layers(&self) -> Vec<Layer> {
        let (c, planes) = (self.net.channels as u64, self.encoder.planes() as u64);
        let conv = |c_in, c_out, k, bias| Layer::Conv {
            c_in,
            c_out,
            k,
            bias,
            norm: !bias,
        };
        let constant = self.encoder.whole_board_planes().len() as u64;
        let mut layers = vec![Layer::Input {
            spatial: planes - constant,
            constant,
            c_out: c,
        }];
        for _ in 0..self.net.blocks {
            layers.extend([conv(c, c, 3, false), conv(c, c, 3, false)]);
            if self.net.se_ratio > 0 {
                let hidden = c / self.net.se_ratio as u64;
                layers.extend([Layer::Linear(c, hidden), Layer::Linear(hidden, c)]);
            }
        }
        let (vc, vh) = (self.net.value_channels as u64, self.net.value_hidden as u64);
        let squares = (BOARD * BOARD) as u64;
        layers.extend([
            conv(c, c, 3, false),
            conv(c, MOVE_TYPES as u64, 1, true),
            conv(c, vc, 1, false),
            Layer::Linear(vc * squares, vh),
            Layer::Linear(vh, 3),
        ]);
        if self.net.material_head {
            let mc = MATERIAL_CHANNELS as u64;
            layers.extend([conv(c, mc, 1, false), Layer::Linear(mc * squares, 1)]);
        }
        if self.net.moves_left_head {
            let mc = MOVES_LEFT_CHANNELS as u64;
            layers.extend([conv(c, mc, 1, false), Layer::Linear(mc * squares, 1)]);
        }
        if self.net.reply_head {
            layers.extend([conv(c, c, 3, false), conv(c, MOVE_TYPES as u64, 1, true)]);
        }
        layers
    }
}

/// A layer that does arithmetic, for [`Architecture::forward_flops`].
enum Layer {
    /// The input convolution (3x3, then a batch norm) as [`InputLayer`]
    /// computes it: over the `spatial` planes, plus the `constant` planes'
    /// values times their responses.
    Input {
        spatial: u64,
        constant: u64,
        c_out: u64,
    },
    /// A convolution over the board, with a bias or followed by a batch norm.
    Conv {
        c_in: u64,
        c_out: u64,
        k: u64,
        bias: bool,
        norm: bool,
    },
    /// A linear layer with a bias: inputs, outputs.
    Linear(u64, u64),
}

impl Layer {
    fn multiply_adds(&self) -> u64 {
        match *self {
            Layer::Input {
                spatial,
                constant,
                c_out,
            } => (spatial * 9 + constant) * c_out * (BOARD * BOARD) as u64,
            Layer::Conv { c_in, c_out, k, .. } => c_in * c_out * k * k * (BOARD * BOARD) as u64,
            Layer::Linear(inputs, outputs) => inputs * outputs,
        }
    }

    fn parameters(&self) -> u64 {
        match *self {
            Layer::Conv {
                c_in,
                c_out,
                k,
                bias,
                norm,
            } => c_in * c_out * k * k + bias as u64 * c_out + norm as u64 * 2 * c_out,
            Layer::Input {
                spatial,
                constant,
                c_out,
            } => (spatial + constant) * c_out * 9 + 2 * c_out,
            Layer::Linear(inputs, outputs) => inputs * outputs + outputs,
        }
    }
}

fn conv(p: nn::Path, c_in: i64, c_out: i64, ksize: i64) -> nn::Conv2D {
    let config = nn::ConvConfig {
        padding: ksize / 2,
        bias: false,
        ..Default::default()
    };
    nn::conv2d(p, c_in, c_out, ksize, config)
}

fn conv_bn_relu(p: nn::Path, c_in: i64, c_out: i64, ksize: i64) -> impl ModuleT {
    let conv = conv(&p / "conv", c_in, c_out, ksize);
    let bn = nn::batch_norm2d(&p / "bn", c_out, Default::default());
    nn::func_t(move |xs, train| xs.apply(&conv).apply_t(&bn, train).relu())
}

/// The first layer: a 3x3 convolution of the input planes, a batch norm and
/// a ReLU. Most planes ([`EncoderConfig::whole_board_planes`]: side to move,
/// castling, the clock, the rule 5/6 state) hold one value over the whole
/// board, and a convolution of such a plane is that value times the plane's
/// response to a board of ones (the kernel's taps that fall on the board,
/// summed). So the convolution runs over the other planes only and adds each
/// position's values times those responses: the same result for every
/// encoded position, with 14% fewer multiply-adds in the 2x32 default net
/// (38 of its 67 planes). The weights are the plain convolution's.
struct InputLayer {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
    /// Indices of the planes convolved, then of the whole-board ones.
    spatial: Tensor,
    constant: Tensor,
    /// `[9, 100]`: 1 where kernel tap `3 * dy + dx` of the output square
    /// reads a square on the board (the rest is zero padding); the net's kind.
    on_board: Tensor,
}

impl InputLayer {
    fn new(p: &nn::Path, encoder: &EncoderConfig, c_out: i64) -> InputLayer {
        let device = p.device();
        let constant = encoder.whole_board_planes();
        let spatial: Vec<i64> = (0..encoder.planes())
            .filter(|plane| !constant.contains(plane))
            .map(|plane| plane as i64)
            .collect();
        let constant: Vec<i64> = constant.into_iter().map(|plane| plane as i64).collect();
        let on_board: Vec<f32> = (0..3)
            .flat_map(|dy| (0..3).map(move |dx| (dy - 1, dx - 1)))
            .flat_map(|(dy, dx)| {
                (0..BOARD * BOARD).map(move |square| {
                    let (y, x) = (square / BOARD + dy, square % BOARD + dx);
                    f32::from((0..BOARD).contains(&y) && (0..BOARD).contains(&x))
                })
            })
            .collect();
        InputLayer {
            conv: conv(p / "conv", encoder.planes() as i64, c_out, 3),
            bn: nn::batch_norm2d(p / "bn", c_out, Default::default()),
            spatial: Tensor::from_slice(&spatial).to_device(device),
            constant: Tensor::from_slice(&constant).to_device(device),
            on_board: Tensor::from_slice(&on_board)
                .view([9, BOARD * BOARD])
                .to_device(device),
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.convolve(xs).apply_t(&self.bn, train).relu()
    }

    /// The convolution of every plane, before the batch norm.
    fn convolve(&self, xs: &Tensor) -> Tensor {
        let weights = &self.conv.ws;
        let c_out = weights.size()[0];
        let planes = self.constant.size()[0];
        let convolved = xs.index_select(1, &self.spatial).conv2d(
            &weights.index_select(1, &self.spatial),
            None::<Tensor>,
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        );
        // `[planes, c_out * 100]`: each whole-board plane's response, from
        // the weights of this call (training and checkpoint loads change
        // them in place), about 1% of a 25-position batch's arithmetic.
        let responses = weights
            .index_select(1, &self.constant)
            .transpose(0, 1)
            .reshape([planes * c_out, 9])
            .matmul(&self.on_board)
            .view([planes, c_out * BOARD * BOARD]);
        let values = xs.index_select(1, &self.constant).select(3, 0).select(2, 0);
        convolved + values.matmul(&responses).view([-1, c_out, BOARD, BOARD])
    }
}

/// Squeeze-excitation: a per-channel gate computed from the board average.
fn squeeze_excitation(p: nn::Path, channels: i64, ratio: i64) -> impl ModuleT {
    let fc1 = nn::linear(&p / "fc1", channels, channels / ratio, Default::default());
    let fc2 = nn::linear(&p / "fc2", channels / ratio, channels, Default::default());
    nn::func_t(move |xs, _| {
        let gate = xs
            .adaptive_avg_pool2d([1, 1])
            .flat_view()
            .apply(&fc1)
            .relu()
            .apply(&fc2)
            .sigmoid()
            .view([-1, channels, 1, 1]);
        xs * gate
    })
}

fn residual_block(p: nn::Path, channels: i64, se_ratio: i64) -> impl ModuleT {
    let conv1 = conv(&p / "conv1", channels, channels, 3);
    let bn1 = nn::batch_norm2d(&p / "bn1", channels, Default::default());
    let conv2 = conv(&p / "conv2", channels, channels, 3);
    let bn2 = nn::batch_norm2d(&p / "bn2", channels, Default::default());
    let se = (se_ratio > 0).then(|| squeeze_excitation(&p / "se", channels, se_ratio));
    nn::func_t(move |xs, train| {
        let ys = xs
            .apply(&conv1)
            .apply_t(&bn1, train)
            .relu()
            .apply(&conv2)
            .apply_t(&bn2, train);
        let ys = match &se {
            Some(se) => ys.apply_t(se, train),
            None => ys,
        };
        (xs + ys).relu()
    })
}

/// The network and the variables it owns.
pub struct Net {
    vs: nn::VarStore,
    arch: Architecture,
    /// The kind of its floating-point variables, which inputs are cast to.
    kind: Kind,
    input: InputLayer,
    /// The residual blocks.
    tower: nn::SequentialT,
    policy: nn::FuncT<'static>,
    value: nn::FuncT<'static>,
    material: Option<nn::FuncT<'static>>,
    moves_left: Option<nn::FuncT<'static>>,
    reply: Option<nn::FuncT<'static>>,
}

/// Every head's output, for training.
pub struct Heads {
    /// Policy logits `[N, 8900]`.
    pub policy: Tensor,
    /// Win/draw/loss logits `[N, 3]`.
    pub value: Tensor,
    /// Material balance predictions `[N]` in (-1, 1), with the material head.
    pub material: Option<Tensor>,
    /// Plies left until the game ends, divided by [`MOVES_LEFT_UNIT`], `[N]`
    /// and at least 0, with the moves-left head.
    pub moves_left: Option<Tensor>,
    /// Logits `[N, 8900]` of the opponent's reply to the move about to be
    /// played, with the reply head. They index the policy map in the
    /// opponent's frame (`policy::move_index(opponent, reply)`), the index
    /// the policy head gives that move in the next position.
    pub reply: Option<Tensor>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Net({} {:?} on {:?})",
            self.arch.net.name(),
            self.kind,
            self.vs.device()
        )
    }
}

impl Net {
    /// A freshly initialised network on `device`.
    pub fn new(arch: Architecture, device: Device) -> Net {
        let vs = nn::VarStore::new(device);
        let p = vs.root();
        let c = arch.net.channels as i64;

        let input = InputLayer::new(&(&p / "input"), &arch.encoder, c);
        let mut tower = nn::seq_t();
        for i in 0..arch.net.blocks {
            tower = tower.add(residual_block(
                &p / "tower" / i,
                c,
                arch.net.se_ratio as i64,
            ));
        }

        let policy_conv = conv_bn_relu(&p / "policy" / "hidden", c, c, 3);
        let policy_out = nn::conv2d(
            &p / "policy" / "out",
            c,
            MOVE_TYPES as i64,
            1,
            Default::default(),
        );
        let policy = nn::func_t(move |xs, train| {
            xs.apply_t(&policy_conv, train)
                .apply(&policy_out)
                .flatten(1, -1)
        });

        let vc = arch.net.value_channels as i64;
        let value_conv = conv_bn_relu(&p / "value" / "conv", c, vc, 1);
        let value_fc1 = nn::linear(
            &p / "value" / "fc1",
            vc * BOARD * BOARD,
            arch.net.value_hidden as i64,
            Default::default(),
        );
        let value_fc2 = nn::linear(
            &p / "value" / "fc2",
            arch.net.value_hidden as i64,
            3,
            Default::default(),
        );
        let value = nn::func_t(move |xs, train| {
            xs.apply_t(&value_conv, train)
                .flatten(1, -1)
                .apply(&value_fc1)
                .relu()
                .apply(&value_fc2)
        });

        let material = arch.net.material_head.then(|| {
            let conv = conv_bn_relu(&p / "material" / "conv", c, MATERIAL_CHANNELS, 1);
            let fc = nn::linear(
                &p / "material" / "fc",
                MATERIAL_CHANNELS * BOARD * BOARD,
                1,
                Default::default(),
            );
            nn::func_t(move |xs, train| {
                xs.apply_t(&conv, train)
                    .flatten(1, -1)
                    .apply(&fc)
                    .tanh()
                    .view([-1])
            })
        });

        // Softplus keeps the prediction positive without the dead units a
        // ReLU output could leave.
        let moves_left = arch.net.moves_left_head.then(|| {
            let conv = conv_bn_relu(&p / "moves_left" / "conv", c, MOVES_LEFT_CHANNELS, 1);
            let fc = nn::linear(
                &p / "moves_left" / "fc",
                MOVES_LEFT_CHANNELS * BOARD * BOARD,
                1,
                Default::default(),
            );
            nn::func_t(move |xs, train| {
                xs.apply_t(&conv, train)
                    .flatten(1, -1)
                    .apply(&fc)
                    .softplus()
                    .view([-1])
            })
        });

        // The policy head's layers, with the output flipped vertically: the
        // trunk sees the board in the side to move's frame, the reply is
        // indexed in the opponent's, which is the same board flipped by rank
        // (`policy::to_frame`). Flipping the `[N, 89, 10, 10]` output maps the
        // logit of a move from square s (opponent's frame) onto the trunk's
        // features at that square, so the head stays local like the policy
        // head; which move type a channel means is the head's to learn.
        let reply = arch.net.reply_head.then(|| {
            let hidden = conv_bn_relu(&p / "reply" / "hidden", c, c, 3);
            let out = nn::conv2d(
                &p / "reply" / "out",
                c,
                MOVE_TYPES as i64,
                1,
                Default::default(),
            );
            nn::func_t(move |xs, train| {
                xs.apply_t(&hidden, train)
                    .apply(&out)
                    .flip([2])
                    .flatten(1, -1)
            })
        });

        Net {
            vs,
            arch,
            kind: Kind::Float,
            input,
            tower,
            policy,
            value,
            material,
            moves_left,
            reply,
        }
    }

    /// Policy logits `[N, 8900]` and win/draw/loss logits `[N, 3]` for input
    /// planes `[N, planes, 10, 10]` (of any float kind: they are cast to the
    /// net's), both of the net's kind.
    pub fn forward_t(&self, xs: &Tensor, train: bool) -> (Tensor, Tensor) {
        let trunk = self.trunk(xs, train);
        (
            trunk.apply_t(&self.policy, train),
            trunk.apply_t(&self.value, train),
        )
    }

    /// What a search asks for: [`Net::forward_t`]'s policy and value
    /// logits, and, if `moves_left` and the net has the head, its prediction
    /// `[N]` (in units of [`MOVES_LEFT_UNIT`] plies).
    pub fn forward_search(
        &self,
        xs: &Tensor,
        moves_left: bool,
    ) -> (Tensor, Tensor, Option<Tensor>) {
        let trunk = self.trunk(xs, false);
        (
            trunk.apply_t(&self.policy, false),
            trunk.apply_t(&self.value, false),
            self.moves_left
                .as_ref()
                .filter(|_| moves_left)
                .map(|head| trunk.apply_t(head, false)),
        )
    }

    /// Every head, auxiliary ones included.
    pub fn forward_heads(&self, xs: &Tensor, train: bool) -> Heads {
        let trunk = self.trunk(xs, train);
        Heads {
            policy: trunk.apply_t(&self.policy, train),
            value: trunk.apply_t(&self.value, train),
            material: self
                .material
                .as_ref()
                .map(|head| trunk.apply_t(head, train)),
            moves_left: self
                .moves_left
                .as_ref()
                .map(|head| trunk.apply_t(head, train)),
            reply: self.reply.as_ref().map(|head| trunk.apply_t(head, train)),
        }
    }

    fn trunk(&self, xs: &Tensor, train: bool) -> Tensor {
        let first = match xs.kind() == self.kind {
            true => self.input.forward_t(xs, train),
            false => self.input.forward_t(&xs.to_kind(self.kind), train),
        };
        first.apply_t(&self.tower, train)
    }

    pub fn arch(&self) -> Architecture {
        self.arch
    }

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The kind of the net's variables and outputs.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Casts every variable (batch-norm statistics included) to `kind`:
    /// `Float`, `BFloat16` or `Half`.
    pub fn set_kind(&mut self, kind: Kind) {
        match kind {
            Kind::BFloat16 => self.vs.bfloat16(),
            Kind::Half => self.vs.half(),
            _ => self.vs.float(),
        }
        self.kind = match kind {
            Kind::BFloat16 | Kind::Half => kind,
            _ => Kind::Float,
        };
        self.input.on_board = self.input.on_board.to_kind(self.kind);
    }

    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    pub fn var_store_mut(&mut self) -> &mut nn::VarStore {
        &mut self.vs
    }

    /// Number of trainable parameters.
    pub fn parameter_count(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::POLICY_SIZE;

    #[test]
    fn output_shapes() {
        let arch = Architecture {
            net: NetConfig {
                se_ratio: 4,
                ..NetConfig::new(2, 16)
            },
            encoder: EncoderConfig::default(),
        };
        let net = Net::new(arch, Device::Cpu);
        let xs = Tensor::zeros(arch.encoder.input_shape(3), (tch::Kind::Float, Device::Cpu));
        let (policy, value) = tch::no_grad(|| net.forward_t(&xs, false));
        assert_eq!(policy.size(), [3, POLICY_SIZE as i64]);
        assert_eq!(value.size(), [3, 3]);
        assert!(net.parameter_count() > 0);
        let bare = net.forward_heads(&xs, false);
        assert!(bare.material.is_none() && bare.moves_left.is_none() && bare.reply.is_none());
        let with_aux = Net::new(
            Architecture {
                net: NetConfig {
                    material_head: true,
                    moves_left_head: true,
                    reply_head: true,
                    ..arch.net
                },
                ..arch
            },
            Device::Cpu,
        );
        let xs = Tensor::rand(arch.encoder.input_shape(3), (tch::Kind::Float, Device::Cpu));
        let heads = tch::no_grad(|| with_aux.forward_heads(&xs, false));
        assert_eq!(heads.material.unwrap().size(), [3]);
        let moves_left = heads.moves_left.unwrap();
        assert_eq!(moves_left.size(), [3]);
        assert!(moves_left.min().double_value(&[]) >= 0.0);
        assert_eq!(heads.reply.unwrap().size(), [3, POLICY_SIZE as i64]);
        // The auxiliary heads leave the search's outputs alone.
        let (policy, value) = tch::no_grad(|| with_aux.forward_t(&xs, false));
        assert!(policy.equal(&heads.policy) && value.equal(&heads.value));
    }

    /// Random inputs as the encoder writes them: each whole-board plane
    /// holds one value per position.
    fn encoded_like(encoder: &EncoderConfig, n: usize) -> Tensor {
        let xs = Tensor::rand(encoder.input_shape(n), (tch::Kind::Float, Device::Cpu));
        for plane in encoder.whole_board_planes() {
            let value = Tensor::rand([n as i64, 1, 1, 1], (tch::Kind::Float, Device::Cpu));
            xs.narrow(1, plane as i64, 1)
                .copy_(&value.expand([-1, 1, BOARD, BOARD], false));
        }
        xs
    }

    /// Which input ranks a logit depends on (a non-zero gradient) through
    /// the planes that differ by square. One block and the heads' two
    /// convolutions see 4 squares away at most.
    fn ranks_seen(net: &Net, logit: impl Fn(&Heads) -> Tensor) -> Vec<i64> {
        let encoder = net.arch().encoder;
        let xs = encoded_like(&encoder, 1).set_requires_grad(true);
        logit(&net.forward_heads(&xs, false)).backward();
        // A whole-board plane's value is read at one square: it has no rank.
        let by_rank = xs
            .grad()
            .index_fill(1, &net.input.constant, 0.0)
            .abs()
            .sum_dim_intlist(&[0i64, 1, 3][..], false, tch::Kind::Float);
        (0..10)
            .filter(|&rank| by_rank.double_value(&[rank]) > 0.0)
            .collect()
    }

    #[test]
    fn the_reply_head_indexes_the_opponents_frame() {
        let arch = Architecture {
            net: NetConfig {
                reply_head: true,
                ..NetConfig::new(1, 8)
            },
            encoder: EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
        };
        let net = Net::new(arch, Device::Cpu);
        // Policy index 0 is a move from a1 of the side to move's frame, at
        // the trunk's rank 0; reply index 0 a move from a1 of the
        // opponent's frame, the trunk's rank 9.
        let policy = ranks_seen(&net, |h| h.policy.get(0).get(0));
        let reply = ranks_seen(&net, |h| h.reply.as_ref().unwrap().get(0).get(0));
        assert_eq!(policy, [0, 1, 2, 3, 4]);
        assert_eq!(reply, [5, 6, 7, 8, 9]);
    }

    /// The input layer computes the plain 3x3 convolution of every plane,
    /// and its weights get the plain convolution's gradient, on inputs as
    /// the encoder writes them.
    #[test]
    fn the_input_layer_is_the_plain_convolution() {
        tch::manual_seed(4);
        let encoder = EncoderConfig {
            history: 2,
            attacks: true,
            hanging: true,
        };
        let arch = Architecture {
            net: NetConfig::new(1, 16),
            encoder,
        };
        let net = Net::new(arch, Device::Cpu);
        let xs = encoded_like(&encoder, 5);
        let layer = &net.input;
        let plain = xs.apply(&layer.conv);
        let folded = layer.convolve(&xs);
        assert_eq!(folded.size(), [5, 16, BOARD, BOARD]);
        assert!(plain.allclose(&folded, 1e-5, 1e-5, false));
        // The outputs differ from zero enough for the check to bite.
        assert!(plain.abs().mean(Kind::Float).double_value(&[]) > 0.05);

        // Weighted by some input planes, so that every output counts.
        let gradient = |output: Tensor| {
            let loss = (output * xs.narrow(1, 0, 16)).sum(Kind::Float);
            Tensor::run_backward(&[loss], &[&layer.conv.ws], false, false).remove(0)
        };
        let plain_gradient = gradient(plain);
        let folded_gradient = gradient(folded);
        assert!(plain_gradient.allclose(&folded_gradient, 1e-4, 1e-4, false));
    }

    #[test]
    fn differences_name_their_keys() {
        let arch = Architecture {
            net: NetConfig::new(2, 16),
            encoder: EncoderConfig {
                history: 2,
                ..EncoderConfig::default()
            },
        };
        assert!(arch.differences(&arch).is_empty());
        let other = Architecture {
            net: NetConfig {
                reply_head: true,
                ..NetConfig::new(3, 16)
            },
            encoder: EncoderConfig {
                history: 4,
                ..EncoderConfig::default()
            },
        };
        let found = arch.differences(&other);
        let expected = [
            ("encoder.history", "2", "4"),
            ("net.blocks", "2", "3"),
            ("net.reply_head", "false", "true"),
        ];
        assert_eq!(found.len(), expected.len(), "{found:?}");
        for (key, ours, theirs) in expected {
            assert!(
                found.contains(&(key.into(), ours.into(), theirs.into())),
                "{key}: {found:?}"
            );
        }
    }

    #[test]
    fn the_layer_walk_matches_the_built_net() {
        for (blocks, channels, se_ratio, aux) in [
            (1, 8, 0, [false, false, false]),
            (2, 16, 4, [true, false, true]),
            (4, 32, 0, [true, true, true]),
            (3, 24, 2, [false, true, false]),
        ] {
            let [material_head, moves_left_head, reply_head] = aux;
            let arch = Architecture {
                net: NetConfig {
                    se_ratio,
                    material_head,
                    moves_left_head,
                    reply_head,
                    ..NetConfig::new(blocks, channels)
                },
                encoder: EncoderConfig {
                    history: 2,
                    ..EncoderConfig::default()
                },
            };
            let net = Net::new(arch, Device::Cpu);
            assert_eq!(
                arch.parameter_count(),
                net.parameter_count() as u64,
                "{arch:?}"
            );
        }
        // 1x8 with 51 input planes (history 1), by hand: input 13*8*9 for
        // the 13 planes that differ by square and 38*8 for the whole-board
        // ones, the block 2*8*8*9, policy 8*8*9 and 8*89, value 8*32 (1x1),
        // then 32*100*128 and 128*3; every convolution covers the 100 squares.
        let arch = Architecture {
            net: NetConfig::new(1, 8),
            encoder: EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
        };
        assert_eq!(arch.encoder.planes(), 51);
        assert_eq!(arch.encoder.whole_board_planes().len(), 38);
        let convs = 100 * (13 * 8 * 9 + 38 * 8 + 2 * 8 * 8 * 9 + 8 * 8 * 9 + 8 * 89 + 8 * 32);
        assert_eq!(arch.forward_flops(), 2 * (convs + 32 * 100 * 128 + 128 * 3));
    }
}
