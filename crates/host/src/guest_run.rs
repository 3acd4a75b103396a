//! Where a guest instance runs: inside the task that waits on it.
//!
//! Until its response head, the request's own task polls the guest; after it,
//! the response body does, from the client connection's task. So each chunk
//! the guest writes reaches the client's socket in the same task poll, with no
//! wake-up of another task (on an idle VM every such hand-off costs tens of µs).
//!
//! Spin's semantics stay: a guest runs to its own end. When its response is
//! over, or the client leaves and the body is dropped, the rest of the run is
//! detached onto its own task; a guest whose client left notices it on its
//! next write, which fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bytes::Bytes;
use futures::task::AtomicWaker;
use http_body::{Body, Frame, SizeHint};

pub type GuestFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A guest's run, polled by its current owner and only when it was woken.
pub struct GuestRun {
    future: Option<GuestFuture>,
    wake: Arc<WakeFlag>,
    waker: Waker,
    runtime: tokio::runtime::Handle,
}

/// Records that the guest was woken and wakes whoever polls it now: a body
/// poll then skips the guest (one fiber switch) when only the client side moved.
struct WakeFlag {
    woken: AtomicBool,
    owner: AtomicWaker,
}

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.owner.wake();
    }
}

impl GuestRun {
    pub fn new(future: GuestFuture) -> Self {
        let wake = Arc::new(WakeFlag { woken: AtomicBool::new(true), owner: AtomicWaker::new() });
        let waker = Waker::from(wake.clone());
        Self { future: Some(future), wake, waker, runtime: tokio::runtime::Handle::current() }
    }

    /// Runs the guest until it waits (if it was woken); `Ready` once it has ended.
    pub fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(future) = self.future.as_mut() else { return Poll::Ready(()) };
        self.wake.owner.register(cx.waker());
        if !self.wake.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        match future.as_mut().poll(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(()) => {
                self.future = None;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Lets the rest of the run go on by itself, as Spin's detached guests do.
    fn detach(&mut self) {
        if let Some(future) = self.future.take() {
            self.runtime.spawn(future);
        }
    }
}

impl Drop for GuestRun {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Waits for `head` while running the guest that will send it.
pub async fn until<T>(run: &mut GuestRun, head: impl Future<Output = T>) -> T {
    let mut head = std::pin::pin!(head);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(value) = head.as_mut().poll(cx) {
            return Poll::Ready(value);
        }
        // A guest that ends has sent its head or dropped the sender.
        match run.poll_run(cx) {
            Poll::Ready(()) => head.as_mut().poll(cx),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A response body that runs its guest each time the connection asks for bytes.
pub struct GuestBody<B> {
    inner: B,
    run: GuestRun,
}

impl<B> GuestBody<B> {
    pub fn new(inner: B, run: GuestRun) -> Self {
        Self { inner, run }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for GuestBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let _ = this.run.poll_run(cx);
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            // The response is over; anything the guest still does is its own.
            this.run.detach();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
