//! Newline-delimited JSON-RPC on stdin/stdout (ACP's stdio transport), with a bound on the
//! length of one incoming line so a client cannot make this process allocate without limit.
//! A line longer than [`MAX_LINE_BYTES`] ends the connection with an error (the rest of the
//! stream cannot be re-synchronised reliably).

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Longest accepted incoming line (one JSON-RPC message), in bytes: 32 MiB leaves room for
/// an image or an embedded resource in a prompt.
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// The stdio transport: lines read from stdin (bounded), lines written to stdout (flushed
/// after each message).
pub fn stdio() -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    lines(tokio::io::stdin(), tokio::io::stdout())
}

/// The same transport over any reader and writer (tests, other pipes).
pub fn lines<R, W>(
    reader: R,
    writer: W,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let incoming = futures::stream::unfold(Some(BufReader::new(reader)), |state| async move {
        let mut reader = state?;
        match read_bounded_line(&mut reader).await {
            Ok(Some(line)) => Some((Ok(line), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    });
    let outgoing = futures::sink::unfold(writer, |mut writer, line: String| async move {
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// Reads one line (without its `\n`/`\r\n`); `None` at EOF. Empty lines are skipped.
async fn read_bounded_line<R>(reader: &mut BufReader<R>) -> std::io::Result<Option<String>>
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut buf = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if buf.is_empty() {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if buf.len() + take > MAX_LINE_BYTES + 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an ACP message is longer than {MAX_LINE_BYTES} bytes"),
            ));
        }
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            while matches!(buf.last(), Some(b'\n' | b'\r')) {
                buf.pop();
            }
            if buf.is_empty() {
                continue;
            }
            break;
        }
    }
    String::from_utf8(buf).map(Some).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "an ACP message is not UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_a_too_long_line_is_refused() {
        let input = b"{\"a\":1}\r\n\n{\"b\":2}\nlast".to_vec();
        let mut reader = BufReader::new(&input[..]);
        assert_eq!(
            read_bounded_line(&mut reader).await.unwrap().unwrap(),
            "{\"a\":1}"
        );
        assert_eq!(
            read_bounded_line(&mut reader).await.unwrap().unwrap(),
            "{\"b\":2}"
        );
        assert_eq!(
            read_bounded_line(&mut reader).await.unwrap().unwrap(),
            "last"
        );
        assert!(read_bounded_line(&mut reader).await.unwrap().is_none());

        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let mut reader = BufReader::new(&long[..]);
        let err = read_bounded_line(&mut reader).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }
}
