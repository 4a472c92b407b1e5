//! Instances of pydantic models made the way the Python client's `_Blueprint` makes them, and
//! the interned names of the fields this module fills.
//!
//! A blueprint comes from the client (`mapping._Blueprint`), which has already decided that its
//! model may be built without validation: `__dict__` holds every field in declaration order
//! (defaults for the missing ones, fresh for mutable defaults), `model_fields_set` names the
//! given ones, `__pydantic_extra__` is None and private attributes hold their defaults. Doing
//! the same through the C API skips the interpreter's work per field, which is most of the cost
//! of reading a session in Python.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySet, PyString, PyTuple, PyType};

/// The value could not be built here: the client's own path (which may validate) builds it.
///
/// Errors of Python helpers called while building (a JSON text that is not an object, say) are
/// declines too, so the client's path is the one that raises them, with its own message.
pub struct Decline;

impl From<PyErr> for Decline {
    fn from(_: PyErr) -> Self {
        Decline
    }
}

/// Declares `Keys`: one interned Python string per name, so dict keys and field sets share
/// the objects (and the cached hashes) of the models' own field names.
macro_rules! keys {
    ($($name:ident),* $(,)?) => {
        /// Interned field and attribute names.
        pub struct Keys {
            $(pub $name: Py<PyString>,)*
        }

        impl Keys {
            pub fn new(py: Python<'_>) -> Self {
                Keys { $($name: PyString::intern(py, stringify!($name)).unbind(),)* }
            }
        }
    };
}

keys!(
    // Event
    id,
    invocation_id,
    author,
    content,
    actions,
    branch,
    timestamp,
    partial,
    turn_complete,
    error_code,
    error_message,
    interrupted,
    long_running_tool_ids,
    custom_metadata,
    usage_metadata,
    grounding_metadata,
    citation_metadata,
    model_version,
    finish_reason,
    // EventActions
    skip_summarization,
    state_delta,
    artifact_delta,
    transfer_to_agent,
    transfer_reason,
    escalate,
    requested_auth_configs,
    requested_tool_confirmations,
    end_of_agent,
    agent_state,
    rewind_before_invocation_id,
    // Content, Part
    role,
    parts,
    text,
    inline_data,
    file_data,
    function_call,
    function_response,
    executable_code,
    code_execution_result,
    thought,
    thought_signature,
    // FunctionCall, FunctionResponse, Blob, FileData, ExecutableCode, CodeExecutionResult
    name,
    args,
    response,
    will_continue,
    data,
    mime_type,
    display_name,
    file_uri,
    code,
    language,
    outcome,
    output,
    // Session
    app_name,
    user_id,
    state,
    events,
    last_update_time,
    _storage_update_marker,
    // What BaseModel instances carry besides their fields
    __dict__,
    __pydantic_fields_set__,
    __pydantic_extra__,
    __pydantic_private__,
);

/// Field values of one instance, in any order (the instance's `__dict__` keeps the model's).
pub type Values<'k, 'py> = Vec<(&'k Py<PyString>, Bound<'py, PyAny>)>;

/// How a fresh default is made.
enum Fresh {
    /// The field's default factory, called.
    Call(Py<PyAny>),
    /// A model with no fields given: what its factory, the model class, makes by validation.
    Model(Box<Blueprint>),
}

/// How to make instances of one model (see the module docs).
pub struct Blueprint {
    class: Py<PyType>,
    /// Every field in declaration order: its default, or None for the fresh ones.
    defaults: Py<PyDict>,
    /// Fields whose default is made anew for each instance, and how.
    fresh: Vec<(Py<PyString>, Fresh)>,
    /// Private attributes and their defaults; None when the model has none.
    private: Option<Py<PyDict>>,
    /// `object`'s `tp_new`, which `object.__new__(cls)` calls.
    new: ffi::newfunc,
}

impl Blueprint {
    /// Reads the client's `_Blueprint` for `what`, which this module fills with the fields
    /// `uses`: refused unless it is usable and has them all. A default factory that
    /// `factories` maps to a blueprint (a model class whose instances need no validation) is
    /// built with it instead of called.
    pub fn from_client(
        what: &str,
        spec: &Bound<'_, PyAny>,
        uses: &[&Py<PyString>],
        factories: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let py = spec.py();
        if !spec.getattr("usable")?.is_truthy()? {
            return Err(PyValueError::new_err(format!(
                "{what}: its model must be validated"
            )));
        }
        let class = spec.getattr("model")?.cast_into::<PyType>()?;
        let defaults = spec.getattr("defaults")?.cast_into::<PyDict>()?;
        for key in uses {
            if !defaults.contains(key.bind(py))? {
                return Err(PyValueError::new_err(format!(
                    "{what}: the model has no field {}",
                    key.bind(py)
                )));
            }
        }
        let mut fresh = Vec::new();
        for item in spec.getattr("fresh")?.try_iter()? {
            let (name, make) = item?.extract::<(Bound<'_, PyString>, Bound<'_, PyAny>)>()?;
            // The interned object, the one `Keys` holds, so `build` compares names by identity.
            let name = PyString::intern(py, name.to_str()?);
            let blueprint = match factories {
                Some(factories) => factories.get_item(&make)?,
                None => None,
            };
            let made = match blueprint {
                // One level only: a factory's own fresh defaults are called.
                Some(spec) => {
                    Fresh::Model(Box::new(Blueprint::from_client(what, &spec, &[], None)?))
                }
                None => Fresh::Call(make.unbind()),
            };
            fresh.push((name.unbind(), made));
        }
        let private = spec.getattr("private")?;
        let private = if private.is_none() {
            None
        } else {
            Some(private.cast_into::<PyDict>()?.unbind())
        };
        Ok(Blueprint {
            class: class.unbind(),
            defaults: defaults.unbind(),
            fresh,
            private,
            new: object_new(py)?,
        })
    }

    /// The private attributes this model declares, as a set of names (None: it has none).
    pub fn private_names<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PySet>>> {
        match &self.private {
            Some(private) => Ok(Some(PySet::new(py, private.bind(py).keys())?)),
            None => Ok(None),
        }
    }

    /// `_Blueprint.build(values)`: the given fields set, the rest at their defaults.
    pub fn build<'py>(
        &self,
        py: Python<'py>,
        keys: &Keys,
        values: &Values<'_, 'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fields = self.defaults.bind(py).copy()?;
        for (key, value) in values {
            fields.set_item(key.bind(py), value)?;
        }
        for (name, make) in &self.fresh {
            if !values.iter().any(|(key, _)| key.is(name)) {
                let value = match make {
                    Fresh::Call(factory) => factory.bind(py).call0()?,
                    Fresh::Model(blueprint) => blueprint.build(py, keys, &Vec::new())?,
                };
                fields.set_item(name.bind(py), value)?;
            }
        }
        let fields_set = PySet::new(py, values.iter().map(|(key, _)| key.bind(py)))?;
        let private = match &self.private {
            Some(private) => private.bind(py).copy()?.into_any(),
            None => py.None().into_bound(py),
        };
        self.instance(py, keys, fields, fields_set, private)
    }

    /// `_Blueprint.build_all(fields, private)`: every field given, in declaration order.
    pub fn build_all<'py>(
        &self,
        py: Python<'py>,
        keys: &Keys,
        fields: Bound<'py, PyDict>,
        private: Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fields_set = PySet::new(py, fields.keys())?;
        self.instance(py, keys, fields, fields_set, private.into_any())
    }

    /// What `BaseModel.model_construct` leaves, set as `object.__setattr__` sets it (the
    /// models' own `__setattr__` would check each assignment).
    fn instance<'py>(
        &self,
        py: Python<'py>,
        keys: &Keys,
        fields: Bound<'py, PyDict>,
        fields_set: Bound<'py, PySet>,
        private: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let class = self.class.bind(py);
        // object.__new__(cls): BaseModel defines no __new__ of its own.
        let args = PyTuple::new(py, [class])?;
        // SAFETY: `new` is object's tp_new, called as object.__new__ calls it, with a type
        // and an argument tuple that live for the call.
        let instance = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                (self.new)(class.as_type_ptr(), args.as_ptr(), std::ptr::null_mut()),
            )?
        };
        set_attribute(&instance, &keys.__dict__, fields.as_any())?;
        set_attribute(
            &instance,
            &keys.__pydantic_fields_set__,
            fields_set.as_any(),
        )?;
        set_attribute(
            &instance,
            &keys.__pydantic_extra__,
            &py.None().into_bound(py),
        )?;
        set_attribute(&instance, &keys.__pydantic_private__, &private)?;
        Ok(instance)
    }
}

/// `object`'s `tp_new` slot (read through the stable ABI, which keeps type objects opaque).
fn object_new(py: Python<'_>) -> PyResult<ffi::newfunc> {
    // SAFETY: PyBaseObject_Type is the interpreter's static `object` type, and its Py_tp_new
    // slot holds a `newfunc` (null only if it had none, checked before the cast).
    unsafe {
        let slot = ffi::PyType_GetSlot(
            std::ptr::addr_of_mut!(ffi::PyBaseObject_Type),
            ffi::Py_tp_new,
        );
        if slot.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(std::mem::transmute::<*mut std::ffi::c_void, ffi::newfunc>(
            slot,
        ))
    }
}

/// `object.__setattr__(instance, name, value)`.
fn set_attribute(
    instance: &Bound<'_, PyAny>,
    name: &Py<PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let status =
        unsafe { ffi::PyObject_GenericSetAttr(instance.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if status < 0 {
        return Err(PyErr::fetch(instance.py()));
    }
    Ok(())
}
