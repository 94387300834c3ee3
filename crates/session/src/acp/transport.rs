//! Newline-delimited JSON-RPC over a pair of byte streams, as editors speak it, read so
//! that nothing on the input can end the connection but its end: a line that is not UTF-8
//! is taken with its bad bytes replaced (the message is then read or refused as any other),
//! and a line longer than [`MAX_LINE_BYTES`] is not kept (the SDK answers it with a parse
//! error). The SDK's own stdio transport ends the connection at the first byte that is not
//! UTF-8.

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// The longest line kept: 64 MiB (a prompt with several large images fits; base64 makes a
/// 5 MB image about 6.7 MB).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// What replaces a line longer than [`MAX_LINE_BYTES`]: not JSON, so the SDK answers it
/// with a parse error (`-32700`), naming this text rather than echoing the line.
const TOO_LONG: &str = "(a line longer than the 64 MiB limit was not read)";

/// The transport for `input` and `output`: [`Lines`] over [`incoming`] and [`outgoing`].
pub fn lines<R, W>(
    input: R,
    output: W,
) -> Lines<impl Sink<String, Error = std::io::Error>, impl Stream<Item = std::io::Result<String>>>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    Lines::new(Box::pin(outgoing(output)), Box::pin(incoming(input)))
}

/// Each line of `input` (without its `\n`), read as [`lines`] says.
pub fn incoming<R>(input: R) -> impl Stream<Item = std::io::Result<String>> + Send + 'static
where
    R: AsyncRead + Unpin + Send + 'static,
{
    futures_util::stream::unfold(BufReader::new(input), |mut reader| async move {
        match read_line(&mut reader, MAX_LINE_BYTES).await {
            Ok(Some(line)) => Some((Ok(line), reader)),
            Ok(None) => None,
            Err(error) => Some((Err(error), reader)),
        }
    })
}

/// Each message written to `output` as one line, flushed. Once the reader has gone (a
/// broken pipe: the editor closed the connection), what is left to say is dropped: that is
/// the end of the connection, not an error of it.
pub fn outgoing<W>(output: W) -> impl Sink<String, Error = std::io::Error> + Send + 'static
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    futures_util::sink::unfold(
        (output, false),
        |(mut output, gone), line: String| async move {
            if gone {
                return Ok((output, true));
            }
            let written = async {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await
            }
            .await;
            match written {
                Ok(()) => Ok((output, false)),
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok((output, true)),
                Err(error) => Err(error),
            }
        },
    )
}

/// The next line of `reader`, at most `limit` bytes of it kept (a longer one is
/// [`TOO_LONG`]); `None` at the end of the input.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    limit: usize,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            break;
        }
        read_any = true;
        let (chunk, done) = match memchr_newline(buffer) {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        if !too_long && line.len() + chunk.len() <= limit {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = chunk.len() + usize::from(done);
        reader.consume(used);
        if done {
            break;
        }
    }
    if !read_any {
        return Ok(None);
    }
    if too_long {
        return Ok(Some(TOO_LONG.to_owned()));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(match String::from_utf8(line) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    }))
}

fn memchr_newline(buffer: &[u8]) -> Option<usize> {
    buffer.iter().position(|&byte| byte == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt as _;

    #[tokio::test]
    async fn a_reader_that_went_away_ends_the_output_quietly() {
        use futures_util::SinkExt as _;
        let (writer, reader) = tokio::io::duplex(64);
        drop(reader);
        let mut sink = Box::pin(outgoing(writer));
        sink.send("{}".to_owned())
            .await
            .expect("a broken pipe is no error");
        sink.send("{}".to_owned())
            .await
            .expect("nor is what follows");
    }

    #[tokio::test]
    async fn bad_bytes_and_long_lines_do_not_end_the_input() {
        let mut input = b"{\"a\": \"caf\xe9\"}\n".to_vec();
        input.extend(vec![b'x'; 100]);
        input.extend(b"\n{\"b\": 1}\r\nlast");
        let (mut writer, reader) = tokio::io::duplex(1 << 16);
        writer.write_all(&input).await.unwrap();
        drop(writer);
        let mut reader = BufReader::new(reader);
        let mut lines = Vec::new();
        while let Some(line) = read_line(&mut reader, 50).await.unwrap() {
            lines.push(line);
        }
        assert_eq!(
            lines,
            ["{\"a\": \"caf\u{fffd}\"}", TOO_LONG, "{\"b\": 1}", "last"]
        );
        let stream: Vec<_> = incoming(&b"one\ntwo\n"[..]).collect().await;
        assert_eq!(stream.len(), 2);
    }
}
