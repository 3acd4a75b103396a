//! The host's log: one line per request plus start-up and guest output.
//! Tests swap stderr for memory to assert what was (and was not) logged.

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

#[derive(Clone, Default)]
pub enum LogSink {
    #[default]
    Stderr,
    Memory(Arc<Mutex<Vec<u8>>>),
}

impl LogSink {
    pub fn memory() -> Self {
        LogSink::Memory(Arc::default())
    }

    pub fn line(&self, line: &str) {
        self.write(format!("{line}\n").as_bytes());
    }

    fn write(&self, bytes: &[u8]) {
        match self {
            LogSink::Stderr => {
                let _ = std::io::stderr().lock().write_all(bytes);
            }
            LogSink::Memory(buffer) => buffer.lock().unwrap().extend_from_slice(bytes),
        }
    }

    /// Everything logged so far (memory sinks only).
    pub fn contents(&self) -> String {
        match self {
            LogSink::Stderr => String::new(),
            LogSink::Memory(buffer) => String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned(),
        }
    }
}

/// A guest's stdout/stderr, prefixed with its component id, into the log.
#[derive(Clone)]
pub struct GuestOutput {
    sink: LogSink,
    prefix: Arc<str>,
}

impl GuestOutput {
    pub fn new(sink: LogSink, component_id: &str) -> Self {
        Self { sink, prefix: format!("[{component_id}] ").into() }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let text = String::from_utf8_lossy(buf);
        for line in text.lines().filter(|l| !l.is_empty()) {
            self.sink.line(&format!("{}{line}", self.prefix));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
