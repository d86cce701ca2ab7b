//! Weights files: safetensors with the architecture and the encoding version
//! in the metadata, so that a weights file alone rebuilds the network.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, TensorView};
use tch::{Device, Kind, Tensor};
use thiserror::Error;

use crate::encoding::ENCODING_VERSION;
use crate::net::{Architecture, Net};

const FORMAT: &str = "mixzero-weights";
const FORMAT_VERSION: &str = "1";

#[derive(Debug, Error)]
pub enum WeightsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a readable safetensors file (truncated or corrupted?): {source}")]
    Format {
        path: String,
        source: SafeTensorError,
    },
    #[error("{path}: not a mixzero weights file (metadata `format` is {found:?})")]
    NotMixzero { path: String, found: Option<String> },
    #[error("{path}: bad metadata `{key}`: {why}")]
    Metadata {
        path: String,
        key: &'static str,
        why: String,
    },
    #[error("{path}: written for input encoding v{found}, this build reads v{expected}")]
    EncodingVersion {
        path: String,
        found: u32,
        expected: u32,
    },
    #[error("{path}: tensor `{name}`: {why}")]
    Tensor {
        path: String,
        name: String,
        why: String,
    },
    #[error("{path}: the tensor data do not match the file's checksum (damaged file?): {found}, recorded {recorded}")]
    Checksum {
        path: String,
        recorded: String,
        found: String,
    },
    #[error("{path}: tensors {names:?} are not part of a {arch} network")]
    UnexpectedTensors {
        path: String,
        arch: String,
        names: Vec<String>,
    },
}

/// The weights as safetensors bytes.
pub fn to_bytes(net: &Net) -> Vec<u8> {
    let mut data: Vec<(String, Vec<usize>, Vec<u8>)> = net
        .var_store()
        .variables()
        .into_iter()
        .map(|(name, tensor)| {
            let tensor = tensor
                .to_device(Device::Cpu)
                .to_kind(Kind::Float)
                .contiguous();
            let shape: Vec<usize> = tensor.size().iter().map(|&d| d as usize).collect();
            let numel = tensor.numel();
            let mut values = vec![0f32; numel];
            tensor.copy_data(&mut values, numel);
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name, shape, bytes)
        })
        .collect();
    data.sort_by(|a, b| a.0.cmp(&b.0));
    let checksum = checksum(
        data.iter()
            .map(|(name, _, bytes)| (name.as_str(), bytes.as_slice())),
    );
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(name, shape, bytes)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), bytes)
                .expect("shape and byte length agree by construction");
            (name.clone(), view)
        })
        .collect();
    let arch = serde_json::to_string(&net.arch()).expect("architecture serialises");
    let metadata = HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("format_version".to_string(), FORMAT_VERSION.to_string()),
        ("encoding_version".to_string(), ENCODING_VERSION.to_string()),
        ("architecture".to_string(), arch),
        ("checksum".to_string(), checksum),
    ]);
    safetensors::serialize(views, Some(metadata)).expect("in-memory serialisation")
}

/// CRC-32 of every tensor's name and data, in name order, as `crc32:xxxxxxxx`:
/// the safetensors header is checked by its parser, the data only by this.
fn checksum<'a>(tensors: impl Iterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut hasher = crc32fast::Hasher::new();
    for (name, data) in tensors {
        hasher.update(name.as_bytes());
        hasher.update(data);
    }
    format!("crc32:{:08x}", hasher.finalize())
}

/// Writes the weights atomically (temporary file, then rename).
pub fn save(net: &Net, path: &Path) -> Result<(), WeightsError> {
    write_atomically(path, &to_bytes(net)).map_err(|source| WeightsError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `bytes` to a temporary file beside `path`, syncs it and renames it
/// over `path`, so a crash leaves either the old file or the new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads the architecture recorded in a weights file.
pub fn read_architecture(bytes: &[u8], path: &str) -> Result<Architecture, WeightsError> {
    let (_, metadata) =
        SafeTensors::read_metadata(bytes).map_err(|source| WeightsError::Format {
            path: path.to_string(),
            source,
        })?;
    let meta = metadata.metadata().clone().unwrap_or_default();
    let format = meta.get("format").cloned();
    if format.as_deref() != Some(FORMAT) {
        return Err(WeightsError::NotMixzero {
            path: path.to_string(),
            found: format,
        });
    }
    let bad = |key, why: String| WeightsError::Metadata {
        path: path.to_string(),
        key,
        why,
    };
    let version: u32 = meta
        .get("encoding_version")
        .ok_or_else(|| bad("encoding_version", "missing".into()))?
        .parse()
        .map_err(|e| bad("encoding_version", format!("{e}")))?;
    if version != ENCODING_VERSION {
        return Err(WeightsError::EncodingVersion {
            path: path.to_string(),
            found: version,
            expected: ENCODING_VERSION,
        });
    }
    let arch: Architecture = serde_json::from_str(
        meta.get("architecture")
            .ok_or_else(|| bad("architecture", "missing".into()))?,
    )
    .map_err(|e| bad("architecture", e.to_string()))?;
    arch.net
        .validate()
        .map_err(|why| bad("architecture", why.to_string()))?;
    arch.encoder
        .validate()
        .map_err(|why| bad("architecture", format!("encoder {why}")))?;
    Ok(arch)
}

/// Rebuilds a network from weights bytes; every variable must be present with its shape.
pub fn from_bytes(bytes: &[u8], path: &str, device: Device) -> Result<Net, WeightsError> {
    let arch = read_architecture(bytes, path)?;
    let tensors = SafeTensors::deserialize(bytes).map_err(|source| WeightsError::Format {
        path: path.to_string(),
        source,
    })?;
    // Files written before checksums existed have none, and load unchecked.
    let (_, metadata) =
        SafeTensors::read_metadata(bytes).map_err(|source| WeightsError::Format {
            path: path.to_string(),
            source,
        })?;
    if let Some(recorded) = metadata.metadata().as_ref().and_then(|m| m.get("checksum")) {
        let mut names = tensors.names();
        names.sort();
        let views = names
            .iter()
            .map(|&name| tensors.tensor(name).map(|view| (name, view)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| WeightsError::Format {
                path: path.to_string(),
                source,
            })?;
        let found = checksum(views.iter().map(|(name, view)| (*name, view.data())));
        if &found != recorded {
            return Err(WeightsError::Checksum {
                path: path.to_string(),
                recorded: recorded.clone(),
                found,
            });
        }
    }
    let mut net = Net::new(arch, device);
    let tensor_error = |name: &str, why: String| WeightsError::Tensor {
        path: path.to_string(),
        name: name.to_string(),
        why,
    };
    let mut variables = net.var_store_mut().variables();
    let mut unexpected: Vec<String> = tensors
        .names()
        .into_iter()
        .filter(|n| !variables.contains_key(*n))
        .map(str::to_string)
        .collect();
    if !unexpected.is_empty() {
        unexpected.sort();
        return Err(WeightsError::UnexpectedTensors {
            path: path.to_string(),
            arch: arch.net.name(),
            names: unexpected,
        });
    }
    for (name, var) in variables.iter_mut() {
        let view = tensors
            .tensor(name)
            .map_err(|_| tensor_error(name, "missing".into()))?;
        if view.dtype() != Dtype::F32 {
            return Err(tensor_error(
                name,
                format!("dtype {:?}, expected F32", view.dtype()),
            ));
        }
        let expected: Vec<usize> = var.size().iter().map(|&d| d as usize).collect();
        if view.shape() != expected {
            return Err(tensor_error(
                name,
                format!("shape {:?}, expected {:?}", view.shape(), expected),
            ));
        }
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if values.iter().any(|v| !v.is_finite()) {
            return Err(tensor_error(name, "holds NaN or infinite values".into()));
        }
        let source = Tensor::from_slice(&values).view(var.size().as_slice());
        tch::no_grad(|| var.copy_(&source.to_device(device)));
    }
    Ok(net)
}

/// Loads a weights file onto `device`.
pub fn load(path: &Path, device: Device) -> Result<Net, WeightsError> {
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    from_bytes(&bytes, &path.display().to_string(), device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::EncoderConfig;
    use crate::net::NetConfig;

    fn small() -> Net {
        let arch = Architecture {
            net: NetConfig {
                se_ratio: 2,
                ..NetConfig::new(1, 8)
            },
            encoder: EncoderConfig::default(),
        };
        Net::new(arch, Device::Cpu)
    }

    fn input(net: &Net) -> Tensor {
        Tensor::rand(
            net.arch().encoder.input_shape(2),
            (Kind::Float, Device::Cpu),
        )
    }

    #[test]
    fn round_trip_preserves_outputs() {
        let net = small();
        let dir = std::env::temp_dir().join(format!("mixzero-weights-{}", std::process::id()));
        let path = dir.join("net.safetensors");
        save(&net, &path).unwrap();
        let loaded = load(&path, Device::Cpu).unwrap();
        assert_eq!(loaded.arch(), net.arch());
        let xs = input(&net);
        let (p1, v1) = tch::no_grad(|| net.forward_t(&xs, false));
        let (p2, v2) = tch::no_grad(|| loaded.forward_t(&xs, false));
        assert!(p1.allclose(&p2, 1e-6, 1e-6, false));
        assert!(v1.allclose(&v2, 1e-6, 1e-6, false));
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn with_aux_heads() -> Net {
        let arch = Architecture {
            net: NetConfig {
                material_head: true,
                moves_left_head: true,
                reply_head: true,
                ..NetConfig::new(1, 8)
            },
            encoder: EncoderConfig::default(),
        };
        Net::new(arch, Device::Cpu)
    }

    /// `bytes` with the same tensors and the architecture metadata rewritten
    /// by `edit`.
    fn rewrite_architecture(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let tensors = SafeTensors::deserialize(bytes).unwrap();
        let (_, metadata) = SafeTensors::read_metadata(bytes).unwrap();
        let mut metadata = metadata.metadata().clone().unwrap();
        let mut arch: serde_json::Value = serde_json::from_str(&metadata["architecture"]).unwrap();
        edit(&mut arch);
        metadata.insert("architecture".into(), arch.to_string());
        safetensors::serialize(tensors.tensors(), Some(metadata)).unwrap()
    }

    #[test]
    fn auxiliary_heads_round_trip() {
        let net = with_aux_heads();
        let loaded = from_bytes(&to_bytes(&net), "aux", Device::Cpu).unwrap();
        assert_eq!(loaded.arch(), net.arch());
        let xs = input(&net);
        let (a, b) = tch::no_grad(|| {
            (
                net.forward_heads(&xs, false),
                loaded.forward_heads(&xs, false),
            )
        });
        for (x, y) in [
            (a.material, b.material),
            (a.moves_left, b.moves_left),
            (a.reply, b.reply),
        ] {
            assert!(x.unwrap().allclose(&y.unwrap(), 1e-6, 1e-6, false));
        }
    }

    #[test]
    fn files_from_before_the_auxiliary_heads_load_without_them() {
        // Written before the moves-left and reply heads existed: no such
        // keys in the architecture.
        let bytes = rewrite_architecture(&to_bytes(&small()), |arch| {
            let net = arch["net"].as_object_mut().unwrap();
            for key in ["material_head", "moves_left_head", "reply_head"] {
                assert!(net.remove(key).is_some(), "{key}");
            }
        });
        let net = from_bytes(&bytes, "old", Device::Cpu).unwrap();
        assert_eq!(net.arch(), small().arch());
        let heads = tch::no_grad(|| net.forward_heads(&input(&net), false));
        assert!(heads.material.is_none() && heads.moves_left.is_none() && heads.reply.is_none());
    }

    #[test]
    fn heads_that_disagree_with_the_tensors_are_reported() {
        // A head the file claims but holds no tensors for.
        let claims = rewrite_architecture(&to_bytes(&small()), |arch| {
            arch["net"]["reply_head"] = true.into();
        });
        let err = from_bytes(&claims, "claims", Device::Cpu).unwrap_err();
        assert!(
            matches!(&err, WeightsError::Tensor { name, .. } if name.starts_with("reply.")),
            "{err}"
        );
        // Tensors of a head the file does not claim.
        let hides = rewrite_architecture(&to_bytes(&with_aux_heads()), |arch| {
            arch["net"]["moves_left_head"] = false.into();
        });
        match from_bytes(&hides, "hides", Device::Cpu).unwrap_err() {
            WeightsError::UnexpectedTensors { names, .. } => {
                assert!(
                    names.iter().all(|n| n.starts_with("moves_left.")),
                    "{names:?}"
                )
            }
            err => panic!("{err}"),
        }
    }

    #[test]
    fn damaged_files_give_typed_errors() {
        let bytes = to_bytes(&small());
        for cut in [0, 4, 8, 100, bytes.len() / 2, bytes.len() - 1] {
            let err = from_bytes(&bytes[..cut], "cut", Device::Cpu).unwrap_err();
            assert!(
                matches!(err, WeightsError::Format { .. }),
                "cut at {cut}: {err}"
            );
        }
        let mut flipped = bytes.clone();
        flipped[10] ^= 0xff;
        assert!(from_bytes(&flipped, "flipped", Device::Cpu).is_err());
        let other = safetensors::serialize(Vec::<(String, TensorView<'_>)>::new(), None).unwrap();
        assert!(matches!(
            from_bytes(&other, "other", Device::Cpu).unwrap_err(),
            WeightsError::NotMixzero { .. }
        ));
    }

    #[test]
    fn damaged_tensor_data_fail_the_checksum() {
        let bytes = to_bytes(&small());
        // Two bytes flipped near the end, inside the tensor data.
        let mut damaged = bytes.clone();
        let at = bytes.len() - 40;
        damaged[at] ^= 0x01;
        damaged[at + 1] ^= 0x80;
        let err = from_bytes(&damaged, "damaged", Device::Cpu).unwrap_err();
        assert!(matches!(err, WeightsError::Checksum { .. }), "{err}");
        assert!(from_bytes(&bytes, "intact", Device::Cpu).is_ok());
    }

    #[test]
    fn mismatched_architecture_is_reported() {
        let mut bytes = to_bytes(&small());
        // Claim a wider net than the tensors hold; same length keeps the header valid.
        let pattern = br#"\"channels\":8"#;
        let at = bytes
            .windows(pattern.len())
            .position(|w| w == pattern)
            .expect("architecture in the header");
        bytes[at + pattern.len() - 1] = b'9';
        let err = from_bytes(&bytes, "patched", Device::Cpu).unwrap_err();
        assert!(matches!(err, WeightsError::Tensor { .. }), "{err}");
    }
}
