//! The residual network: a tower of residual blocks (optionally with
//! squeeze-excitation), a policy head over the 8,900-move space and a
//! win/draw/loss value head, and optional auxiliary heads that only training
//! reads (material, moves left, the opponent's reply). Built in the style of
//! tch-rs's `vision/resnet.rs`.

use serde::{Deserialize, Serialize};
use std::sync::Mutex;

use tch::nn;
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

/// The batch norms' epsilon, which folding them needs too.
const BN_EPS: f64 = 1e-5;

/// A convolution without bias and the batch norm after it: every
/// convolution of the trunk and of the heads' first layers.
struct ConvBn {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
}

impl ConvBn {
    fn new(conv_path: nn::Path, bn_path: nn::Path, c_in: i64, c_out: i64, ksize: i64) -> ConvBn {
        let config = nn::BatchNormConfig {
            eps: BN_EPS,
            ..Default::default()
        };
        ConvBn {
            conv: conv(conv_path, c_in, c_out, ksize),
            bn: nn::batch_norm2d(bn_path, c_out, config),
        }
    }

    /// A layer at `p / "conv"` and `p / "bn"`.
    fn at(p: &nn::Path, c_in: i64, c_out: i64, ksize: i64) -> ConvBn {
        ConvBn::new(p / "conv", p / "bn", c_in, c_out, ksize)
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        xs.apply(&self.conv).apply_t(&self.bn, train)
    }

    /// The layer at inference as one convolution with a bias: the batch
    /// norm's per-channel scale multiplies the weights, and its shift (the
    /// running mean scaled, and the norm's own bias) becomes the bias. In
    /// fp32, whatever the net's kind.
    fn folded_weights(&self) -> (Tensor, Tensor) {
        let bn = &self.bn;
        let float = |t: &Tensor| t.to_kind(Kind::Float);
        let gamma = bn.ws.as_ref().map(float).expect("affine batch norm");
        let beta = bn.bs.as_ref().map(float).expect("affine batch norm");
        let scale = gamma * (float(&bn.running_var) + BN_EPS).rsqrt();
        let bias = beta - float(&bn.running_mean) * &scale;
        let weights = float(&self.conv.ws) * scale.view([-1, 1, 1, 1]);
        (weights, bias)
    }

    fn folded(&self, layout: Layout) -> FoldedConv {
        let (weights, bias) = self.folded_weights();
        FoldedConv::new(weights, bias, self.conv.ws.size()[2] / 2, layout)
    }
}

/// How the inference form stores its 4-d tensors.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// Channels last (`NHWC` in memory, `NCHW` to every operation): oneDNN
    /// convolves such tensors without reordering them, and a 2x32 net
    /// served 1.3-1.6 times as many positions a second on this project's
    /// 2-core CPU; unmeasured on a GPU, which keeps the default order.
    channels_last: bool,
    kind: Kind,
}

impl Layout {
    fn apply(self, xs: Tensor) -> Tensor {
        match self.channels_last {
            true => xs.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2]),
            false => xs.contiguous(),
        }
    }
}

/// A convolution with a bias in the net's kind and the inference layout.
struct FoldedConv {
    weights: Tensor,
    bias: Tensor,
    padding: i64,
}

impl FoldedConv {
    fn new(weights: Tensor, bias: Tensor, padding: i64, layout: Layout) -> FoldedConv {
        FoldedConv {
            weights: layout.apply(weights.to_kind(layout.kind)),
            bias: bias.to_kind(layout.kind),
            padding,
        }
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        let p = self.padding;
        xs.conv2d(&self.weights, Some(&self.bias), [1, 1], [p, p], [1, 1], 1)
    }
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
    layer: ConvBn,
    /// Indices of the planes convolved, then of the whole-board ones.
    spatial: Tensor,
    constant: Tensor,
    /// `[9, 100]` fp32: 1 where kernel tap `3 * dy + dx` of the output
    /// square reads a square on the board (the rest is zero padding).
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
            layer: ConvBn::at(p, encoder.planes() as i64, c_out, 3),
            spatial: Tensor::from_slice(&spatial).to_device(device),
            constant: Tensor::from_slice(&constant).to_device(device),
            on_board: Tensor::from_slice(&on_board)
                .view([9, BOARD * BOARD])
                .to_device(device),
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.convolve(xs).apply_t(&self.layer.bn, train).relu()
    }

    /// The convolution of every plane, before the batch norm.
    fn convolve(&self, xs: &Tensor) -> Tensor {
        let weights = &self.layer.conv.ws;
        let convolved = xs.index_select(1, &self.spatial).conv2d(
            &weights.index_select(1, &self.spatial),
            None::<Tensor>,
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        );
        // Computed from the weights of this call (training and checkpoint
        // loads change them in place), about 1% of a 25-position batch's
        // arithmetic; the inference form computes them once.
        let responses = self.responses(weights).flatten(1, -1);
        let sums = self.values(xs).matmul(&responses).view_as(&convolved);
        convolved + sums
    }

    /// `[planes, c_out, 100]`: each whole-board plane's response to
    /// `weights` at every output square.
    fn responses(&self, weights: &Tensor) -> Tensor {
        let c_out = weights.size()[0];
        let planes = self.constant.size()[0];
        weights
            .index_select(1, &self.constant)
            .transpose(0, 1)
            .reshape([planes * c_out, 9])
            .matmul(&self.on_board.to_kind(weights.kind()))
            .view([planes, c_out, BOARD * BOARD])
    }

    /// `[N, planes]`: each position's whole-board planes, read at one square.
    fn values(&self, xs: &Tensor) -> Tensor {
        xs.select(3, 0).select(2, 0).index_select(1, &self.constant)
    }

    fn folded(&self, layout: Layout) -> FoldedInput {
        let (weights, bias) = self.layer.folded_weights();
        let responses = self.responses(&weights);
        // `[planes, 100 * c_out]` in the order of the output's memory.
        let responses = match layout.channels_last {
            true => responses.transpose(1, 2),
            false => responses,
        };
        FoldedInput {
            conv: FoldedConv::new(weights.index_select(1, &self.spatial), bias, 1, layout),
            responses: responses.contiguous().flatten(1, -1).to_kind(layout.kind),
        }
    }

    /// The inference form of [`InputLayer::forward_t`].
    fn forward_folded(&self, folded: &FoldedInput, xs: &Tensor, layout: Layout) -> Tensor {
        let spatial = match layout.channels_last {
            // One copy gathers the planes straight into channels-last order.
            true => xs
                .permute([0, 2, 3, 1])
                .index_select(3, &self.spatial)
                .permute([0, 3, 1, 2]),
            false => xs.index_select(1, &self.spatial),
        };
        let mut convolved = folded.conv.forward(&spatial);
        let n = xs.size()[0];
        let c_out = convolved.size()[1];
        let sums = self.values(xs).matmul(&folded.responses);
        let sums = match layout.channels_last {
            true => sums.view([n, BOARD, BOARD, c_out]).permute([0, 3, 1, 2]),
            false => sums.view([n, c_out, BOARD, BOARD]),
        };
        convolved.g_add_(&sums).relu_()
    }
}

struct FoldedInput {
    conv: FoldedConv,
    /// `[planes, 100 * c_out]`.
    responses: Tensor,
}

/// Squeeze-excitation: a per-channel gate computed from the board average.
struct SqueezeExcitation {
    fc1: nn::Linear,
    fc2: nn::Linear,
    channels: i64,
}

impl SqueezeExcitation {
    fn new(p: nn::Path, channels: i64, ratio: i64) -> SqueezeExcitation {
        SqueezeExcitation {
            fc1: nn::linear(&p / "fc1", channels, channels / ratio, Default::default()),
            fc2: nn::linear(&p / "fc2", channels / ratio, channels, Default::default()),
            channels,
        }
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        let gate = xs
            .adaptive_avg_pool2d([1, 1])
            .flat_view()
            .apply(&self.fc1)
            .relu()
            .apply(&self.fc2)
            .sigmoid()
            .view([-1, self.channels, 1, 1]);
        xs * gate
    }
}

struct ResidualBlock {
    first: ConvBn,
    second: ConvBn,
    se: Option<SqueezeExcitation>,
}

impl ResidualBlock {
    fn new(p: nn::Path, channels: i64, se_ratio: i64) -> ResidualBlock {
        ResidualBlock {
            first: ConvBn::new(&p / "conv1", &p / "bn1", channels, channels, 3),
            second: ConvBn::new(&p / "conv2", &p / "bn2", channels, channels, 3),
            se: (se_ratio > 0).then(|| SqueezeExcitation::new(&p / "se", channels, se_ratio)),
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let ys = self.first.forward_t(xs, train).relu();
        let ys = self.second.forward_t(&ys, train);
        let ys = match &self.se {
            Some(se) => se.forward(&ys),
            None => ys,
        };
        (xs + ys).relu()
    }

    fn forward_folded(&self, folded: &[FoldedConv; 2], xs: &Tensor) -> Tensor {
        let ys = folded[0].forward(xs).relu_();
        let ys = folded[1].forward(&ys);
        let mut ys = match &self.se {
            Some(se) => se.forward(&ys),
            None => ys,
        };
        ys.g_add_(xs).relu_()
    }
}

/// The policy head's layers (the reply head's too): a 3x3 convolution with
/// batch norm and ReLU, then a 1x1 convolution to the move types,
/// `[N, 89, 10, 10]`.
struct PolicyHead {
    hidden: ConvBn,
    out: nn::Conv2D,
}

impl PolicyHead {
    fn new(p: &nn::Path, channels: i64) -> PolicyHead {
        PolicyHead {
            hidden: ConvBn::at(&(p / "hidden"), channels, channels, 3),
            out: nn::conv2d(
                p / "out",
                channels,
                MOVE_TYPES as i64,
                1,
                Default::default(),
            ),
        }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.hidden.forward_t(xs, train).relu().apply(&self.out)
    }

    fn folded(&self, layout: Layout) -> [FoldedConv; 2] {
        let bias = self.out.bs.as_ref().expect("the output's bias");
        [
            self.hidden.folded(layout),
            FoldedConv::new(self.out.ws.shallow_clone(), bias.shallow_clone(), 0, layout),
        ]
    }

    fn forward_folded(folded: &[FoldedConv; 2], xs: &Tensor) -> Tensor {
        folded[1].forward(&folded[0].forward(xs).relu_())
    }
}

/// A 1x1 convolution with batch norm and ReLU, then fully connected layers
/// with ReLUs between them, then `output`. The value, material and
/// moves-left heads.
struct DenseHead {
    conv: ConvBn,
    fcs: Vec<nn::Linear>,
    output: Output,
}

/// What a dense head's last layer gives.
#[derive(Clone, Copy)]
enum Output {
    /// Logits as they are.
    Logits,
    /// One number in (-1, 1) a position, `[N]`.
    Tanh,
    /// One number of at least 0 a position, `[N]`: softplus keeps it
    /// positive without the dead units a ReLU output could leave.
    Softplus,
}

impl DenseHead {
    /// `fcs`: each fully connected layer's name and width.
    fn new(
        p: &nn::Path,
        c_in: i64,
        channels: i64,
        fcs: &[(&str, i64)],
        output: Output,
    ) -> DenseHead {
        let mut inputs = channels * BOARD * BOARD;
        let fcs = fcs
            .iter()
            .map(|&(name, width)| {
                let fc = nn::linear(p / name, inputs, width, Default::default());
                inputs = width;
                fc
            })
            .collect();
        DenseHead {
            conv: ConvBn::at(&(p / "conv"), c_in, channels, 1),
            fcs,
            output,
        }
    }

    /// A head of one number a position: one fully connected layer, `fc`.
    fn scalar(p: &nn::Path, c_in: i64, channels: i64, output: Output) -> DenseHead {
        DenseHead::new(p, c_in, channels, &[("fc", 1)], output)
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.dense(self.conv.forward_t(xs, train).relu())
    }

    fn forward_folded(&self, folded: &FoldedConv, xs: &Tensor) -> Tensor {
        self.dense(folded.forward(xs).relu_())
    }

    fn dense(&self, features: Tensor) -> Tensor {
        let mut ys = features.flatten(1, -1);
        for (i, fc) in self.fcs.iter().enumerate() {
            if i > 0 {
                ys = ys.relu_();
            }
            ys = ys.apply(fc);
        }
        match self.output {
            Output::Logits => ys,
            Output::Tanh => ys.tanh().view([-1]),
            Output::Softplus => ys.softplus().view([-1]),
        }
    }
}

/// The network and the variables it owns.
pub struct Net {
    vs: nn::VarStore,
    arch: Architecture,
    /// The kind of its floating-point variables, which inputs are cast to.
    kind: Kind,
    input: InputLayer,
    tower: Vec<ResidualBlock>,
    policy: PolicyHead,
    value: DenseHead,
    material: Option<DenseHead>,
    moves_left: Option<DenseHead>,
    reply: Option<PolicyHead>,
    /// Every variable (shallow copies), whose version counters tell when
    /// the weights changed in place.
    variables: Vec<Tensor>,
    /// The inference form [`Net::forward_search`] runs, and the variables'
    /// version it was built at.
    folded: Mutex<Option<(i64, Folded)>>,
}

/// The net at inference ([`Net::forward_search`]): every batch norm folded
/// into the convolution before it, so that a layer is one convolution with a
/// bias and an in-place ReLU, in the [`Layout`] the device convolves
/// fastest. The same outputs as [`Net::forward_t`] without training, up to
/// rounding.
struct Folded {
    layout: Layout,
    input: FoldedInput,
    tower: Vec<[FoldedConv; 2]>,
    policy: [FoldedConv; 2],
    value: FoldedConv,
    moves_left: Option<FoldedConv>,
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
        let tower = (0..arch.net.blocks)
            .map(|i| ResidualBlock::new(&p / "tower" / i, c, arch.net.se_ratio as i64))
            .collect();
        let policy = PolicyHead::new(&(&p / "policy"), c);
        let value = DenseHead::new(
            &(&p / "value"),
            c,
            arch.net.value_channels as i64,
            &[("fc1", arch.net.value_hidden as i64), ("fc2", 3)],
            Output::Logits,
        );
        let material = arch
            .net
            .material_head
            .then(|| DenseHead::scalar(&(&p / "material"), c, MATERIAL_CHANNELS, Output::Tanh));
        let moves_left = arch.net.moves_left_head.then(|| {
            DenseHead::scalar(
                &(&p / "moves_left"),
                c,
                MOVES_LEFT_CHANNELS,
                Output::Softplus,
            )
        });
        let reply = arch
            .net
            .reply_head
            .then(|| PolicyHead::new(&(&p / "reply"), c));
        let variables = vs.variables().into_values().collect();

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
            variables,
            folded: Mutex::new(None),
        }
    }

    /// Policy logits `[N, 8900]` and win/draw/loss logits `[N, 3]` for input
    /// planes `[N, planes, 10, 10]` (of any float kind: they are cast to the
    /// net's), both of the net's kind.
    pub fn forward_t(&self, xs: &Tensor, train: bool) -> (Tensor, Tensor) {
        let trunk = self.trunk(xs, train);
        (
            self.policy_logits(&trunk, train),
            self.value.forward_t(&trunk, train),
        )
    }

    /// What a search asks for: [`Net::forward_t`]'s policy and value
    /// logits without training, and, if `moves_left` and the net has the
    /// head, its prediction `[N]` (in units of [`MOVES_LEFT_UNIT`] plies).
    /// Runs the inference form ([`Folded`]), rebuilt first if the weights
    /// changed since it was built; call it without gradients.
    pub fn forward_search(
        &self,
        xs: &Tensor,
        moves_left: bool,
    ) -> (Tensor, Tensor, Option<Tensor>) {
        let version: i64 = self.variables.iter().map(Tensor::internal_version).sum();
        let mut cached = self.folded.lock().unwrap_or_else(|e| e.into_inner());
        if cached.as_ref().is_none_or(|(built, _)| *built != version) {
            *cached = Some((version, tch::no_grad(|| self.fold())));
        }
        let (_, folded) = cached.as_ref().expect("just built");
        let xs = self.of_kind(xs);
        let mut trunk = self.input.forward_folded(&folded.input, &xs, folded.layout);
        for (block, convs) in self.tower.iter().zip(&folded.tower) {
            trunk = block.forward_folded(convs, &trunk);
        }
        let policy = PolicyHead::forward_folded(&folded.policy, &trunk).flatten(1, -1);
        let value = self.value.forward_folded(&folded.value, &trunk);
        let moves_left = match (&self.moves_left, &folded.moves_left) {
            (Some(head), Some(conv)) if moves_left => Some(head.forward_folded(conv, &trunk)),
            _ => None,
        };
        (policy, value, moves_left)
    }

    fn fold(&self) -> Folded {
        let layout = Layout {
            channels_last: self.device() == Device::Cpu,
            kind: self.kind,
        };
        Folded {
            layout,
            input: self.input.folded(layout),
            tower: self
                .tower
                .iter()
                .map(|block| [block.first.folded(layout), block.second.folded(layout)])
                .collect(),
            policy: self.policy.folded(layout),
            value: self.value.conv.folded(layout),
            moves_left: self
                .moves_left
                .as_ref()
                .map(|head| head.conv.folded(layout)),
        }
    }

    /// Every head, auxiliary ones included.
    pub fn forward_heads(&self, xs: &Tensor, train: bool) -> Heads {
        let trunk = self.trunk(xs, train);
        Heads {
            policy: self.policy_logits(&trunk, train),
            value: self.value.forward_t(&trunk, train),
            material: self
                .material
                .as_ref()
                .map(|head| head.forward_t(&trunk, train)),
            moves_left: self
                .moves_left
                .as_ref()
                .map(|head| head.forward_t(&trunk, train)),
            // The output flipped vertically: the trunk sees the board in the
            // side to move's frame, the reply is indexed in the opponent's,
            // which is the same board flipped by rank (`policy::to_frame`).
            // Flipping the `[N, 89, 10, 10]` output maps the logit of a move
            // from square s (opponent's frame) onto the trunk's features at
            // that square, so the head stays local like the policy head;
            // which move type a channel means is the head's to learn.
            reply: self
                .reply
                .as_ref()
                .map(|head| head.forward_t(&trunk, train).flip([2]).flatten(1, -1)),
        }
    }

    /// `xs` in the net's kind (the same tensor if it is already).
    fn of_kind(&self, xs: &Tensor) -> Tensor {
        match xs.kind() == self.kind {
            true => xs.shallow_clone(),
            false => xs.to_kind(self.kind),
        }
    }

    fn policy_logits(&self, trunk: &Tensor, train: bool) -> Tensor {
        self.policy.forward_t(trunk, train).flatten(1, -1)
    }

    fn trunk(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut trunk = self.input.forward_t(&self.of_kind(xs), train);
        for block in &self.tower {
            trunk = block.forward_t(&trunk, train);
        }
        trunk
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
        *self.folded.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// The variables, to change; the inference form is rebuilt afterwards.
    pub fn var_store_mut(&mut self) -> &mut nn::VarStore {
        *self.folded.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
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
            ply_plane: 100,
        };
        let arch = Architecture {
            net: NetConfig::new(1, 16),
            encoder,
        };
        let net = Net::new(arch, Device::Cpu);
        let xs = encoded_like(&encoder, 5);
        let layer = &net.input;
        let weights = &layer.layer.conv.ws;
        let plain = xs.apply(&layer.layer.conv);
        let shortcut = layer.convolve(&xs);
        assert_eq!(shortcut.size(), [5, 16, BOARD, BOARD]);
        assert!(plain.allclose(&shortcut, 1e-5, 1e-5, false));
        // The outputs differ from zero enough for the check to bite.
        assert!(plain.abs().mean(Kind::Float).double_value(&[]) > 0.05);

        // Weighted by some input planes, so that every output counts.
        let gradient = |output: Tensor| {
            let loss = (output * xs.narrow(1, 0, 16)).sum(Kind::Float);
            Tensor::run_backward(&[loss], &[weights], false, false).remove(0)
        };
        let plain_gradient = gradient(plain);
        let shortcut_gradient = gradient(shortcut);
        assert!(plain_gradient.allclose(&shortcut_gradient, 1e-4, 1e-4, false));
    }

    /// Batch norms that do something: a fresh one is the identity.
    fn randomise_batch_norms(net: &Net) {
        tch::no_grad(|| {
            for (name, mut variable) in net.var_store().variables() {
                let values = match name.rsplit('.').next() {
                    Some("running_var") | Some("weight") if name.contains("bn") => {
                        variable.rand_like() + 0.5
                    }
                    Some("running_mean") | Some("bias") if name.contains("bn") => {
                        variable.randn_like() * 0.3
                    }
                    _ => continue,
                };
                variable.copy_(&values);
            }
        });
    }

    /// The largest difference between two outputs, relative to the largest value.
    fn relative_difference(a: &Tensor, b: &Tensor) -> f64 {
        let a = a.to_kind(Kind::Float);
        let b = b.to_kind(Kind::Float);
        let scale = a.abs().max().double_value(&[]).max(1e-6);
        (a - b).abs().max().double_value(&[]) / scale
    }

    #[test]
    fn the_inference_form_is_the_net() {
        tch::manual_seed(5);
        let encoder = EncoderConfig::default();
        for se_ratio in [0, 4] {
            let arch = Architecture {
                net: NetConfig {
                    se_ratio,
                    material_head: true,
                    moves_left_head: true,
                    ..NetConfig::new(2, 16)
                },
                encoder,
            };
            let mut net = Net::new(arch, Device::Cpu);
            randomise_batch_norms(&net);
            let xs = encoded_like(&encoder, 7);
            // The inference form's outputs against the training form's
            // `reference` (the same net's unless given).
            let check = |net: &Net, reference: Option<&Heads>, tolerance: f64| {
                let (policy, value, moves_left) = tch::no_grad(|| net.forward_search(&xs, true));
                let own = tch::no_grad(|| net.forward_heads(&xs, false));
                let heads = reference.unwrap_or(&own);
                assert_eq!(policy.size(), [7, POLICY_SIZE as i64]);
                assert_eq!(value.size(), [7, 3]);
                assert!(heads.value.std(true).double_value(&[]) > 0.01);
                let moves_left = moves_left.expect("asked for");
                for (plain, inference) in [
                    (&heads.policy, &policy),
                    (&heads.value, &value),
                    (heads.moves_left.as_ref().unwrap(), &moves_left),
                ] {
                    let difference = relative_difference(plain, inference);
                    assert!(
                        difference < tolerance,
                        "{difference} ({:?})",
                        inference.kind()
                    );
                }
                assert!(tch::no_grad(|| net.forward_search(&xs, false)).2.is_none());
                policy
            };
            let before = check(&net, None, 1e-5);

            // Weights changed in place (as an optimizer step or a checkpoint
            // load changes them) rebuild the inference form.
            tch::no_grad(|| {
                let mut weights =
                    net.var_store().variables()["tower.1.conv2.weight"].shallow_clone();
                weights.copy_(&(weights.randn_like() * 0.1));
            });
            let after = check(&net, None, 1e-5);
            assert!(relative_difference(&before, &after) > 0.01);

            // In bf16 both forms round; the inference form stays about as
            // close to fp32 as the training form (1-3% of the largest output).
            let fp32 = tch::no_grad(|| net.forward_heads(&xs, false));
            net.set_kind(Kind::BFloat16);
            let bf16 = check(&net, Some(&fp32), 0.05);
            assert_eq!(bf16.kind(), Kind::BFloat16);
        }
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
