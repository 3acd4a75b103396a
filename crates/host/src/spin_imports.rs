//! The Spin platform imports, bound from the WIT vendored in `wit/` (taken from
//! spin-sdk 5.2.0, so the guest and host agree on every signature).

use wasmtime::component::{HasData, Linker, Resource};

use crate::key_value::KeyValueStore;
use crate::state::RequestState;
use crate::variables::VariableError;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "ratatoskr:host/spin-imports",
        imports: { default: trappable },
        with: {
            "fermyon:spin/key-value.store": crate::key_value::KeyValueStore,
        },
    });
}

use bindings::fermyon::spin::{key_value, variables};

/// The slice of per-request state the Spin imports need.
struct SpinImports;

impl HasData for SpinImports {
    type Data<'a> = &'a mut RequestState;
}

pub fn add_to_linker(linker: &mut Linker<RequestState>) -> anyhow::Result<()> {
    variables::add_to_linker::<RequestState, SpinImports>(linker, |s| s)?;
    key_value::add_to_linker::<RequestState, SpinImports>(linker, |s| s)?;
    Ok(())
}

impl variables::Host for RequestState {
    fn get(&mut self, name: String) -> wasmtime::Result<Result<String, variables::Error>> {
        Ok(self.component.variables.get(&name).map_err(|e| match e {
            VariableError::InvalidName(m) => variables::Error::InvalidName(m),
            VariableError::Undefined(m) => variables::Error::Undefined(m),
        }))
    }
}

impl key_value::Host for RequestState {}

impl key_value::HostStore for RequestState {
    fn open(&mut self, label: String) -> wasmtime::Result<Result<Resource<KeyValueStore>, key_value::Error>> {
        // Spin: a label the component does not list is access-denied, even if it exists.
        if !self.component.key_value_stores.contains(&label) {
            return Ok(Err(key_value::Error::AccessDenied));
        }
        match self.app.key_value.get(&label) {
            Some(store) => Ok(Ok(self.table.push(store)?)),
            None => Ok(Err(key_value::Error::NoSuchStore)),
        }
    }

    fn get(&mut self, store: Resource<KeyValueStore>, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, key_value::Error>> {
        Ok(self.table.get(&store)?.get(&key).map_err(key_value::Error::Other))
    }

    fn set(&mut self, store: Resource<KeyValueStore>, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), key_value::Error>> {
        Ok(self.table.get(&store)?.set(&key, &value).map_err(key_value::Error::Other))
    }

    fn delete(&mut self, store: Resource<KeyValueStore>, key: String) -> wasmtime::Result<Result<(), key_value::Error>> {
        Ok(self.table.get(&store)?.delete(&key).map_err(key_value::Error::Other))
    }

    fn exists(&mut self, store: Resource<KeyValueStore>, key: String) -> wasmtime::Result<Result<bool, key_value::Error>> {
        Ok(self.table.get(&store)?.exists(&key).map_err(key_value::Error::Other))
    }

    fn get_keys(&mut self, store: Resource<KeyValueStore>) -> wasmtime::Result<Result<Vec<String>, key_value::Error>> {
        Ok(self.table.get(&store)?.keys().map_err(key_value::Error::Other))
    }

    fn drop(&mut self, store: Resource<KeyValueStore>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        Ok(())
    }
}
