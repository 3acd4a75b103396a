//! Per-request store state: WASI, wasi:http with our outbound hook, and the
//! component's Spin configuration.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::app::{AppInner, ComponentConfig};
use crate::memory::{MemoryGauge, MemoryPeak};
use crate::outbound_http::OutboundHooks;

pub struct RequestState {
    pub(crate) app: Arc<AppInner>,
    pub(crate) component: Arc<ComponentConfig>,
    pub(crate) table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHooks,
    /// The store's `ResourceLimiter`: its linear memory, reported to the component's peak.
    pub(crate) memory: MemoryGauge,
}

impl RequestState {
    pub(crate) fn new(app: Arc<AppInner>, component: Arc<ComponentConfig>, wasi: WasiCtx, peak: MemoryPeak) -> Self {
        let hooks = OutboundHooks::new(app.clone(), component.clone());
        let memory = MemoryGauge::new(peak);
        Self { app, component, table: ResourceTable::new(), wasi, http: WasiHttpCtx::new(), hooks, memory }
    }
}

impl WasiView for RequestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for RequestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}
