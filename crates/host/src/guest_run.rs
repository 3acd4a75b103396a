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
    wakes: Arc<Wakes>,
    guest: Arc<Flag>,
    guest_waker: Waker,
    runtime: tokio::runtime::Handle,
}

/// Whoever polls the run now, and whether it is inside that poll. A wake
/// while it is inside (the guest filling the body channel the same poll then
/// drains) only sets a flag: waking the owner's own running task would make
/// tokio queue it again and rouse an idle worker to steal it, on every chunk.
struct Wakes {
    owner: AtomicWaker,
    polling: AtomicBool,
}

/// One thing the owner polls (the guest, the body channel): was it woken?
struct Flag {
    woken: AtomicBool,
    wakes: Arc<Wakes>,
}

impl Flag {
    fn new(wakes: &Arc<Wakes>) -> Arc<Self> {
        Arc::new(Flag { woken: AtomicBool::new(true), wakes: wakes.clone() })
    }

    fn take(&self) -> bool {
        self.woken.swap(false, Ordering::SeqCst)
    }

    fn is_raised(&self) -> bool {
        self.woken.load(Ordering::SeqCst)
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // SeqCst pairs with `Wakes::leave`: either the owner sees this flag
        // after its poll, or this wake sees that the poll is over.
        self.woken.store(true, Ordering::SeqCst);
        if !self.wakes.polling.load(Ordering::SeqCst) {
            self.wakes.owner.wake();
        }
    }
}

impl Wakes {
    fn enter(&self, cx: &Context<'_>) {
        self.owner.register(cx.waker());
        self.polling.store(true, Ordering::SeqCst);
    }

    /// Ends a poll that returns `Pending`: a flag raised meanwhile means the
    /// owner must come back, so it wakes itself.
    fn leave(&self, cx: &Context<'_>, flags: &[&Flag]) {
        self.done();
        if flags.iter().any(|flag| flag.is_raised()) {
            cx.waker().wake_by_ref();
        }
    }

    /// Marks the owner's poll over. After a `Ready` nothing more is needed:
    /// the owner polls again when it wants more and sees any flag then.
    fn done(&self) {
        self.polling.store(false, Ordering::SeqCst);
    }
}

impl GuestRun {
    pub fn new(future: GuestFuture) -> Self {
        let wakes = Arc::new(Wakes { owner: AtomicWaker::new(), polling: AtomicBool::new(false) });
        let guest = Flag::new(&wakes);
        let guest_waker = Waker::from(guest.clone());
        Self { future: Some(future), wakes, guest, guest_waker, runtime: tokio::runtime::Handle::current() }
    }

    /// Runs the guest once, until it waits, if it was woken (the caller is
    /// inside `Wakes::enter`); `true` once the guest has ended.
    fn run_once(&mut self) -> bool {
        let Some(future) = self.future.as_mut() else { return true };
        if !self.guest.take() {
            return false;
        }
        if future.as_mut().poll(&mut Context::from_waker(&self.guest_waker)).is_ready() {
            self.future = None;
            return true;
        }
        false
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
        run.wakes.enter(cx);
        let ended = run.run_once();
        // The guest may have sent the head just now, or ended without one.
        let head = head.as_mut().poll(cx);
        if head.is_pending() && !ended {
            run.wakes.leave(cx, &[&run.guest]);
        } else {
            run.wakes.done();
        }
        head
    })
    .await
}

/// Guest and channel rounds per body poll before the owner yields.
const ROUNDS: usize = 3;

/// A response body that runs its guest each time the connection asks for bytes.
pub struct GuestBody<B> {
    inner: B,
    run: GuestRun,
    channel: Arc<Flag>,
    channel_waker: Waker,
}

impl<B> GuestBody<B> {
    pub fn new(inner: B, run: GuestRun) -> Self {
        let channel = Flag::new(&run.wakes);
        let channel_waker = Waker::from(channel.clone());
        Self { inner, run, channel, channel_waker }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for GuestBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        this.run.wakes.enter(cx);
        // A flag raised inside this poll is usually its own doing (the guest's
        // upstream read wakes the guest again); another round costs less than
        // a task wake, but a few rounds bound a guest that keeps waking itself.
        for _ in 0..ROUNDS {
            this.run.run_once();
            this.channel.take();
            let frame = Pin::new(&mut this.inner).poll_frame(&mut Context::from_waker(&this.channel_waker));
            match &frame {
                Poll::Pending if this.run.guest.is_raised() || this.channel.is_raised() => continue,
                Poll::Pending => {}
                Poll::Ready(Some(Ok(_))) => this.run.wakes.done(),
                Poll::Ready(None | Some(Err(_))) => {
                    this.run.wakes.done();
                    // The response is over; anything the guest still does is its own.
                    this.run.detach();
                }
            }
            if frame.is_ready() {
                return frame;
            }
            break;
        }
        this.run.wakes.leave(cx, &[&this.run.guest, &this.channel]);
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use http_body_util::BodyExt;
    use tokio::sync::{mpsc, oneshot};

    use super::*;

    /// The guest's side of a response body: a bounded channel, as wasmtime's.
    struct Channel(mpsc::Receiver<Bytes>);

    impl Body for Channel {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
        }
    }

    fn guest_body(guest: impl Future<Output = ()> + Send + 'static, rx: mpsc::Receiver<Bytes>) -> GuestBody<Channel> {
        GuestBody::new(Channel(rx), GuestRun::new(Box::pin(guest)))
    }

    async fn next_data(body: &mut GuestBody<Channel>) -> Option<Bytes> {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame()).await.expect("a frame within 5 s");
        frame.map(|frame| frame.unwrap().into_data().unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_guest_woken_from_another_thread_gets_its_chunks_out() {
        let (tx, rx) = mpsc::channel(2);
        let (go, wait) = oneshot::channel::<()>();
        let mut body = guest_body(
            async move {
                wait.await.unwrap();
                for word in ["one", "two"] {
                    tx.send(Bytes::from(word)).await.unwrap();
                }
            },
            rx,
        );
        // A plain thread wakes the guest while the body's poll is not running.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            go.send(()).unwrap();
        });
        let started = std::time::Instant::now();
        assert_eq!(next_data(&mut body).await.as_deref(), Some(&b"one"[..]));
        // The wake reached the body's owner (not a later poll for another reason).
        assert!(started.elapsed() < Duration::from_secs(1), "woken after {:?}", started.elapsed());
        assert_eq!(next_data(&mut body).await.as_deref(), Some(&b"two"[..]));
        assert_eq!(next_data(&mut body).await, None, "the guest ended, so did its body");
    }

    /// Counts the owner's wakes.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_guest_that_keeps_waking_itself_yields_to_its_owner() {
        let (tx, rx) = mpsc::channel(1);
        let mut spins = 0;
        let guest = std::future::poll_fn(move |cx| {
            spins += 1;
            if spins < 10 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let _ = tx.try_send(Bytes::from_static(b"done"));
            Poll::Ready(())
        });
        let mut body = guest_body(guest, rx);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut polls = 0;
        let frame = loop {
            polls += 1;
            if let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(&mut cx) {
                break frame;
            }
            assert!(polls < 100, "never finished");
        };
        assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), "done");
        // Ten guest rounds, at most ROUNDS per poll, and each Pending woke the owner.
        assert_eq!(polls, 10_usize.div_ceil(ROUNDS));
        assert_eq!(count.0.load(Ordering::SeqCst), polls - 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_guest_runs_on_when_its_client_drops_the_body() {
        let (tx, rx) = mpsc::channel(1);
        let (go, wait) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        let mut body = guest_body(
            async move {
                tx.send(Bytes::from_static(b"head")).await.unwrap();
                wait.await.unwrap();
                // The client is gone: the write fails, and the guest still ends its way.
                let failed = tx.send(Bytes::from_static(b"more")).await.is_err();
                let _ = done_tx.send(failed);
            },
            rx,
        );
        assert_eq!(next_data(&mut body).await.as_deref(), Some(&b"head"[..]));
        drop(body);
        go.send(()).unwrap();
        let failed = tokio::time::timeout(Duration::from_secs(5), done).await.expect("guest ran on").unwrap();
        assert!(failed, "its next write failed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_guest_runs_on_after_its_body_has_ended() {
        let (tx, rx) = mpsc::channel(1);
        let (go, wait) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        let mut body = guest_body(
            async move {
                tx.send(Bytes::from_static(b"all")).await.unwrap();
                drop(tx);
                wait.await.unwrap();
                let _ = done_tx.send(());
            },
            rx,
        );
        assert_eq!(next_data(&mut body).await.as_deref(), Some(&b"all"[..]));
        assert_eq!(next_data(&mut body).await, None);
        // The body is over but still held: the run was already detached.
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), done).await.expect("guest ran on after its body").unwrap();
        drop(body);
    }
}
