use super::*;

fn wav_bytes(rate: u32, channels: u16, seconds: f32) -> Vec<u8> {
    let mut cur = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut cur, spec).unwrap();
    let n = (rate as f32 * seconds) as usize;
    for i in 0..n {
        let s = (2.0 * std::f32::consts::PI * 440.0 * i as f32 / rate as f32).sin();
        for _ in 0..channels {
            w.write_sample((s * 10_000.0) as i16).unwrap();
        }
    }
    w.finalize().unwrap();
    cur.into_inner()
}

#[test]
fn sniffs_containers() {
    assert_eq!(sniff(&wav_bytes(8000, 1, 0.01)), Some(Format::Wav));
    assert_eq!(sniff(b"OggS\0\0"), Some(Format::Ogg));
    assert_eq!(sniff(b"fLaC\0"), Some(Format::Flac));
    assert_eq!(sniff(b"ID3\x04"), Some(Format::Mp3));
    assert_eq!(sniff(b"hello world"), None);
}

#[test]
fn base64_and_data_uris_decode() {
    let raw = b"RIFF1234WAVE";
    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
    assert_eq!(decode_data(&b64).unwrap().0, raw);
    let (bytes, mime) = decode_data(&format!("data:audio/wav;base64,{b64}")).unwrap();
    assert_eq!(bytes, raw);
    assert_eq!(mime.as_deref(), Some("audio/wav"));
    let e = decode_data("data:audio/wav,plain").unwrap_err();
    assert!(matches!(e, Error::InvalidParams { .. }), "{e:?}");
    let e = decode_data("!!! not base64 !!!").unwrap_err();
    assert!(e.to_string().contains("base64"), "{e}");
}

#[test]
fn stereo_44k_becomes_16k_mono_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.wav");
    let d = wav_to_target(&wav_bytes(44_100, 2, 0.5), "params.data", &out).unwrap();
    assert!((d.as_secs_f32() - 0.5).abs() < 0.01);
    let r = hound::WavReader::open(&out).unwrap();
    assert_eq!(r.spec().sample_rate, 16_000);
    assert_eq!(r.spec().channels, 1);
    assert_eq!(r.spec().bits_per_sample, 16);
    let n = r.len();
    assert!((7990..=8010).contains(&n), "{n} samples");
    // The tone survives: RMS of a 10k-amplitude sine is about 7071.
    let samples: Vec<i16> = r.into_samples().map(Result::unwrap).collect();
    let rms =
        (samples.iter().map(|s| (*s as f64).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
    assert!((6000.0..8000.0).contains(&rms), "rms {rms}");
}

#[test]
fn resampling_does_not_alias_a_tone_above_the_new_nyquist() {
    // 10 kHz is above 8 kHz (the Nyquist frequency of 16 kHz) and must be filtered out.
    let rate = 44_100;
    let tone: Vec<f32> = (0..rate)
        .map(|i| (2.0 * std::f32::consts::PI * 10_000.0 * i as f32 / rate as f32).sin())
        .collect();
    let out = resample(&tone, rate as u32, 16_000);
    let rms = (out[100..out.len() - 100]
        .iter()
        .map(|s| (*s as f64).powi(2))
        .sum::<f64>()
        / out.len() as f64)
        .sqrt();
    assert!(rms < 0.1, "aliased energy {rms}");
}

#[tokio::test]
async fn garbage_and_empty_audio_are_invalid_params_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.wav");
    let e = to_target(
        b"definitely not audio",
        Some("audio/wav"),
        "params.data",
        None,
        dir.path(),
        &out,
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("unknown audio format"), "{e}");
    let mut truncated = wav_bytes(16_000, 1, 0.0);
    truncated.truncate(30);
    let e = to_target(&truncated, None, "params.data", None, dir.path(), &out)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidParams { .. }), "{e:?}");
    let e = to_target(
        &wav_bytes(16_000, 1, 0.0),
        None,
        "params.data",
        None,
        dir.path(),
        &out,
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let e = to_target(b"OggS\0\0\0\0", None, "params.data", None, dir.path(), &out)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("sox"), "{e}");
}

#[test]
fn a_killed_recorders_header_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.wav");
    let mut bytes = wav_bytes(16_000, 1, 0.1);
    bytes[4..8].copy_from_slice(&0u32.to_le_bytes());
    bytes[40..44].copy_from_slice(&0u32.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    repair_wav_header(&p).unwrap();
    let r = hound::WavReader::open(&p).unwrap();
    assert_eq!(r.len(), 1600);
}
