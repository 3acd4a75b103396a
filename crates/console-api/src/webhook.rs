//! A turn's alert POSTs (alert.rs decides them), sent beside the relayed
//! stream in the pump's own loop: a single-threaded guest cannot wait on a
//! webhook without holding the stream up, so each POST is started and left,
//! its answer's pollables polled with the stream's, bounded by the
//! `upstream_timeout_ms` deadline, never retried. A failure is one log line
//! (the alert's kind and why), never the URL, which may hold a secret, nor a
//! header value.

use std::cell::RefCell;
use std::time::Instant;

use guest_http::{start, Beside, Method, Outgoing, Pending, Timeouts, TransportFailure};
use wasi::clocks::monotonic_clock;
use wasi::io::poll::Pollable;

use crate::alert::{AlertKind, Delivery};
use crate::relay::Relay;

pub struct Webhooks<'r, F: Fn(bool, &str) -> bool> {
    relay: &'r RefCell<Relay>,
    /// The platform's outbound check (the portable console keeps its own list).
    may_call: F,
    /// The stream's clock: `opened` is its 0 (`: t=`), `opened_ns` the same on the monotonic clock.
    opened: Instant,
    opened_ns: u64,
    enabled: bool,
    /// Armed where the rules could next find a stall.
    stall: Option<Pollable>,
    sending: Vec<(AlertKind, Pending)>,
}

impl<'r, F: Fn(bool, &str) -> bool> Webhooks<'r, F> {
    pub fn new(relay: &'r RefCell<Relay>, opened: Instant, may_call: F) -> Self {
        let elapsed = opened.elapsed().as_nanos() as u64;
        let enabled = relay.borrow().next_alert_check().is_some();
        let mut hooks = Webhooks {
            relay,
            may_call,
            opened,
            opened_ns: monotonic_clock::now().saturating_sub(elapsed),
            enabled,
            stall: None,
            sending: Vec::new(),
        };
        hooks.arm();
        hooks
    }

    fn ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    fn arm(&mut self) {
        if self.stall.is_none() {
            if let Some(due) = self.relay.borrow().next_alert_check() {
                // A millisecond late, so the check at the timer reads the threshold as passed.
                let at = self.opened_ns.saturating_add(due.saturating_add(1).saturating_mul(1_000_000));
                self.stall = Some(monotonic_clock::subscribe_instant(at));
            }
        }
    }

    /// Starts every POST the rules have found by now.
    fn send_due(&mut self) {
        let due = self.relay.borrow_mut().alerts(self.ms());
        for delivery in due {
            match self.send(&delivery) {
                Ok(pending) => self.sending.push((delivery.kind, pending)),
                Err(failure) => log(delivery.kind, &Err(failure)),
            }
        }
    }

    fn send(&self, d: &Delivery) -> Result<Pending, TransportFailure> {
        if !(self.may_call)(d.https, &d.authority) {
            return Err(TransportFailure::NotAllowed);
        }
        let headers = vec![
            ("content-type".to_string(), b"application/json".to_vec()),
            ("user-agent".to_string(), b"ratatoskr-web".to_vec()),
        ];
        start(&Outgoing {
            method: Method::Post,
            https: d.https,
            authority: &d.authority,
            path_and_query: &d.path_and_query,
            headers,
            body: Some(d.body.as_bytes()),
            timeouts: Timeouts::all(d.timeout),
        })
    }

    /// The stream is over (its response finished): the last alerts go, and
    /// every POST still out is waited for, each until its own deadline.
    pub fn finish(mut self) {
        if !self.enabled {
            return;
        }
        self.stall = None;
        self.send_due();
        while !self.sending.is_empty() {
            let ready = wasi::io::poll::poll(&self.pollables());
            self.settle(&ready);
        }
    }

    /// Drops every POST whose answer (or deadline) came, logging a failure.
    fn settle(&mut self, ready: &[u32]) {
        let base = u32::from(self.stall.is_some());
        let mut index = 0;
        self.sending.retain(|(kind, pending)| {
            let mine = [base + 2 * index, base + 2 * index + 1];
            index += 1;
            if !mine.iter().any(|i| ready.contains(i)) {
                return true;
            }
            match pending.poll() {
                None => true,
                Some(answer) => {
                    log(*kind, &answer.map(|up| up.status));
                    false
                }
            }
        });
    }
}

impl<F: Fn(bool, &str) -> bool> Beside for Webhooks<'_, F> {
    fn pollables(&self) -> Vec<&Pollable> {
        let mut list: Vec<&Pollable> = self.stall.iter().collect();
        for (_, pending) in &self.sending {
            list.extend(pending.pollables());
        }
        list
    }

    fn woke(&mut self, ready: &[u32]) {
        if !self.enabled {
            return;
        }
        self.settle(ready);
        // A fired timer stays ready: it is dropped, and armed again where the rules say.
        if self.stall.is_some() && ready.contains(&0) {
            self.stall = None;
        }
        self.send_due();
        self.arm();
    }
}

/// One line per POST that did not get a 2xx.
fn log(kind: AlertKind, answer: &Result<u16, TransportFailure>) {
    let why = match answer {
        Ok(200..=299) => return,
        Ok(status) => format!("the webhook answered {status}"),
        Err(TransportFailure::Timeout) => "the webhook did not answer in time".to_string(),
        Err(TransportFailure::NotAllowed) => "the webhook's origin is not an allowed outbound host".to_string(),
        Err(_) => "the webhook could not be reached".to_string(),
    };
    // One write, so a runtime that prefixes each write keeps it one line.
    let line = format!("alert webhook: the {} alert was not delivered: {why} (not retried)\n", kind.name());
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}
