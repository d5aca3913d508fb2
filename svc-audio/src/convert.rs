//! Audio input for `audio.transcribe`: base64 / data-URI decoding, format sniffing, and
//! conversion to what the engines need — 16 kHz mono 16-bit PCM wav. Wav is decoded with
//! `hound` and resampled in process (windowed-sinc); other formats (ogg, flac, mp3, …) go
//! through `sox` when it is installed. Bad or unknown audio is `invalid_params` with the
//! reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;

use crate::child::{run, ChildSpec};
use crate::error::{Error, Result};

/// Sample rate every engine gets.
pub const TARGET_RATE: u32 = 16_000;
/// Largest accepted input (decoded bytes).
pub const MAX_BYTES: usize = 100 * 1024 * 1024;

/// The container of some audio bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// RIFF/WAVE.
    Wav,
    /// Ogg (Vorbis, Opus).
    Ogg,
    /// FLAC.
    Flac,
    /// MPEG audio.
    Mp3,
    /// WebM / Matroska.
    Webm,
}

impl Format {
    /// The file extension sox needs to pick the decoder.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Wav => "wav",
            Format::Ogg => "ogg",
            Format::Flac => "flac",
            Format::Mp3 => "mp3",
            Format::Webm => "webm",
        }
    }
}

/// The format of `bytes` from its magic number.
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    match bytes {
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'A', b'V', b'E', ..] => Some(Format::Wav),
        [b'O', b'g', b'g', b'S', ..] => Some(Format::Ogg),
        [b'f', b'L', b'a', b'C', ..] => Some(Format::Flac),
        [b'I', b'D', b'3', ..] => Some(Format::Mp3),
        [0xFF, b, ..] if b & 0xE0 == 0xE0 => Some(Format::Mp3),
        [0x1A, 0x45, 0xDF, 0xA3, ..] => Some(Format::Webm),
        _ => None,
    }
}

/// Decodes `data`: plain base64 (standard or URL-safe, padding optional) or a
/// `data:<mime>;base64,<…>` URI. Returns the bytes and the URI's media type.
pub fn decode_data(data: &str) -> Result<(Vec<u8>, Option<String>)> {
    let field = "params.data";
    let (mime, payload) = match data.strip_prefix("data:") {
        Some(rest) => {
            let (meta, payload) = rest
                .split_once(',')
                .ok_or_else(|| Error::invalid(field, "data URI without a comma"))?;
            if !meta.ends_with(";base64") {
                return Err(Error::invalid(field, "only base64 data URIs are accepted"));
            }
            let mime = meta.trim_end_matches(";base64");
            (Some(mime.to_owned()).filter(|m| !m.is_empty()), payload)
        }
        None => (None, data),
    };
    let clean: String = payload
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    if clean.is_empty() {
        return Err(Error::invalid(field, "the audio is empty"));
    }
    if clean.len() / 4 * 3 > MAX_BYTES {
        return Err(Error::invalid(
            field,
            format!("the audio is larger than {MAX_BYTES} bytes"),
        ));
    }
    let trimmed = clean.trim_end_matches('=');
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(trimmed))
        .map_err(|e| Error::invalid(field, format!("not valid base64: {e}")))?;
    Ok((bytes, mime))
}

/// Samples decoded from a wav, as f32 in [-1, 1], interleaved.
struct Pcm {
    rate: u32,
    channels: u16,
    samples: Vec<f32>,
}

fn read_wav(bytes: &[u8], field: &str) -> Result<Pcm> {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes))
        .map_err(|e| Error::invalid(field, format!("not a readable wav file: {e}")))?;
    let spec = reader.spec();
    if spec.channels == 0 || spec.sample_rate == 0 {
        return Err(Error::invalid(
            field,
            "the wav header has no channels or no sample rate",
        ));
    }
    let bad = |e: hound::Error| Error::invalid(field, format!("the wav data is damaged: {e}"));
    let samples: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .into_samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(bad)?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f32;
            reader
                .into_samples::<i32>()
                .map(|s| s.map(|s| s as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(bad)?
        }
    };
    if samples.is_empty() {
        return Err(Error::invalid(field, "the audio is empty (no samples)"));
    }
    Ok(Pcm {
        rate: spec.sample_rate,
        channels: spec.channels,
        samples,
    })
}

fn downmix(pcm: &Pcm) -> Vec<f32> {
    let n = pcm.channels as usize;
    if n == 1 {
        return pcm.samples.clone();
    }
    pcm.samples
        .chunks(n)
        .map(|frame| frame.iter().sum::<f32>() / n as f32)
        .collect()
}

/// Resamples mono `input` from `from` Hz to `to` Hz with a Hann-windowed sinc (low-pass at
/// the lower Nyquist frequency, so downsampling does not alias).
pub fn resample(input: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to || input.is_empty() {
        return input.to_vec();
    }
    const HALF_TAPS: i64 = 16;
    let ratio = to as f64 / from as f64;
    let cutoff = ratio.min(1.0);
    let out_len = ((input.len() as f64) * ratio).round().max(1.0) as usize;
    let half_width = HALF_TAPS as f64 / cutoff;
    (0..out_len)
        .map(|i| {
            let center = i as f64 / ratio;
            let lo = (center - half_width).floor().max(0.0) as i64;
            let hi = ((center + half_width).ceil() as i64).min(input.len() as i64 - 1);
            let mut acc = 0.0f64;
            let mut norm = 0.0f64;
            for j in lo..=hi {
                let x = (j as f64 - center) * cutoff;
                let sinc = if x.abs() < 1e-9 {
                    1.0
                } else {
                    (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x)
                };
                let w = 0.5 + 0.5 * (std::f64::consts::PI * x / HALF_TAPS as f64).cos();
                let k = if x.abs() >= HALF_TAPS as f64 {
                    0.0
                } else {
                    sinc * w
                };
                acc += input[j as usize] as f64 * k;
                norm += k;
            }
            if norm.abs() > 1e-9 {
                (acc / norm) as f32
            } else {
                0.0
            }
        })
        .collect()
}

fn write_pcm16(samples: &[f32], out: &Path) -> Result<()> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: TARGET_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(out, spec)
        .map_err(|e| Error::Internal(format!("write {}: {e}", out.display())))?;
    // TPDF dither (±1 LSB) when requantising to 16 bits, as sox does by default. Besides
    // being the right way to requantise, it matters to pocketsphinx: synthetic speech has
    // runs of exact digital silence, which break its noise estimation (espeak-ng's "hello
    // world" is heard as "oh we're all" undithered, "hello world" dithered). Seeded, so
    // a conversion is reproducible.
    let mut seed: u32 = 0x9E37_79B9;
    let mut uniform = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as f32 / u32::MAX as f32 - 0.5
    };
    for s in samples {
        let dither = uniform() + uniform();
        let v = (s.clamp(-1.0, 1.0) * i16::MAX as f32 + dither).round();
        w.write_sample(v.clamp(i16::MIN as f32, i16::MAX as f32) as i16)
            .map_err(|e| Error::Internal(format!("write {}: {e}", out.display())))?;
    }
    w.finalize()
        .map_err(|e| Error::Internal(format!("write {}: {e}", out.display())))
}

/// Converts wav `bytes` to 16 kHz mono 16-bit at `out`, in process.
pub fn wav_to_target(bytes: &[u8], field: &str, out: &Path) -> Result<Duration> {
    let pcm = read_wav(bytes, field)?;
    let mono = downmix(&pcm);
    let resampled = resample(&mono, pcm.rate, TARGET_RATE);
    write_pcm16(&resampled, out)?;
    Ok(Duration::from_secs_f64(mono.len() as f64 / pcm.rate as f64))
}

/// Converts audio `bytes` of any supported format to 16 kHz mono 16-bit wav at `out`:
/// wav in process, the rest through `sox` (when `sox` is `None`, anything but wav is
/// `invalid_params`).
pub async fn to_target(
    bytes: &[u8],
    mime: Option<&str>,
    field: &str,
    sox: Option<&Path>,
    scratch: &Path,
    out: &Path,
) -> Result<()> {
    if bytes.is_empty() {
        return Err(Error::invalid(field, "the audio is empty"));
    }
    let format = sniff(bytes).ok_or_else(|| {
        Error::invalid(
            field,
            format!(
                "unknown audio format{} (accepted: wav; ogg, flac, mp3 when sox is installed)",
                mime.map(|m| format!(" (declared {m})")).unwrap_or_default()
            ),
        )
    })?;
    if format == Format::Wav {
        wav_to_target(bytes, field, out)?;
        return Ok(());
    }
    let Some(sox) = sox else {
        return Err(Error::invalid(
            field,
            format!(
                "{} audio needs sox to convert, and sox is not installed (send wav)",
                format.extension()
            ),
        ));
    };
    let input: PathBuf = scratch.join(format!(
        "{}.{}",
        snowpea_common::ids::new_id("in"),
        format.extension()
    ));
    std::fs::write(&input, bytes)?;
    let spec = ChildSpec::new(
        "sox",
        sox,
        vec![
            input.clone().into(),
            "-r".into(),
            TARGET_RATE.to_string().into(),
            "-c".into(),
            "1".into(),
            "-b".into(),
            "16".into(),
            out.into(),
        ],
        Duration::from_secs(60),
    );
    let result = run(&spec, None).await;
    let _ = std::fs::remove_file(&input);
    result.map_err(|e| {
        Error::invalid(
            field,
            format!(
                "sox cannot decode the {} audio: {}",
                format.extension(),
                e.stderr().trim()
            ),
        )
    })?;
    Ok(())
}

/// Rewrites the RIFF and data sizes of a wav a recorder was killed before finishing
/// (sizes 0 or too large), from the file length. A no-op on a good header.
pub fn repair_wav_header(path: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let len = f.metadata()?.len();
    let mut head = [0u8; 44];
    if len < 44
        || f.read_exact(&mut head).is_err()
        || &head[0..4] != b"RIFF"
        || &head[36..40] != b"data"
    {
        return Ok(());
    }
    let riff = (len - 8).min(u32::MAX as u64) as u32;
    let data = (len - 44).min(u32::MAX as u64) as u32;
    f.seek(SeekFrom::Start(4))?;
    f.write_all(&riff.to_le_bytes())?;
    f.seek(SeekFrom::Start(40))?;
    f.write_all(&data.to_le_bytes())?;
    Ok(())
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
