//! `adk_grpc_services_native`: the Python client's optional builder of ADK sessions.
//!
//! `get_session` of a 1,000-event session and `list_sessions` of 1,000 sessions spend most of
//! their time in the interpreter, turning decoded messages into pydantic objects field by field.
//! This module takes the reply's bytes instead, decodes them with prost and makes the same
//! objects through the C API. It builds exactly what the client's own path builds: the client
//! hands over its blueprints and helpers, and anything this module does not build itself (see
//! `events`) is built by a callback into the client. The client works without this module.

use adk_proto::session::v1 as pb;
use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

mod events;
mod models;

use events::Builders;
use models::{Blueprint, Keys};

/// Builds ADK `Session`s from `adk.session.v1` replies (see the module docs).
#[pyclass(frozen, module = "adk_grpc_services_native")]
struct Builder {
    builders: Builders,
}

#[pymethods]
impl Builder {
    /// `blueprints`: the client's `_Blueprint` of each model, by model name; `factories`: the
    /// blueprints of model classes that are default factories of those models; the helpers and
    /// enum maps are the client's own.
    #[new]
    #[pyo3(signature = (*, blueprints, factories, from_json, model_from_json, metadata_models, finish_reasons, languages, outcomes))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        blueprints: &Bound<'_, PyDict>,
        factories: &Bound<'_, PyDict>,
        from_json: Py<PyAny>,
        model_from_json: Py<PyAny>,
        metadata_models: (Py<PyAny>, Py<PyAny>, Py<PyAny>),
        finish_reasons: Py<PyDict>,
        languages: Py<PyDict>,
        outcomes: Py<PyDict>,
    ) -> PyResult<Self> {
        let k = Keys::new(py);
        let blueprint = |name: &str, uses: &[&Py<PyString>]| -> PyResult<Blueprint> {
            let spec = blueprints
                .get_item(name)?
                .ok_or_else(|| PyValueError::new_err(format!("no blueprint for {name}")))?;
            Blueprint::from_client(name, &spec, uses, Some(factories))
        };
        let event = blueprint(
            "Event",
            &[
                &k.id,
                &k.invocation_id,
                &k.author,
                &k.content,
                &k.actions,
                &k.branch,
                &k.timestamp,
                &k.partial,
                &k.turn_complete,
                &k.error_code,
                &k.error_message,
                &k.interrupted,
                &k.long_running_tool_ids,
                &k.custom_metadata,
                &k.usage_metadata,
                &k.grounding_metadata,
                &k.citation_metadata,
                &k.model_version,
                &k.finish_reason,
            ],
        )?;
        let actions = blueprint(
            "EventActions",
            &[
                &k.skip_summarization,
                &k.state_delta,
                &k.artifact_delta,
                &k.transfer_to_agent,
                &k.transfer_reason,
                &k.escalate,
                &k.requested_auth_configs,
                &k.requested_tool_confirmations,
                &k.end_of_agent,
                &k.agent_state,
                &k.rewind_before_invocation_id,
            ],
        )?;
        let content = blueprint("Content", &[&k.role, &k.parts])?;
        let part = blueprint(
            "Part",
            &[
                &k.text,
                &k.inline_data,
                &k.file_data,
                &k.function_call,
                &k.function_response,
                &k.executable_code,
                &k.code_execution_result,
                &k.thought,
                &k.thought_signature,
            ],
        )?;
        let function_call =
            blueprint("FunctionCall", &[&k.id, &k.name, &k.will_continue, &k.args])?;
        let function_response = blueprint(
            "FunctionResponse",
            &[&k.id, &k.name, &k.will_continue, &k.response],
        )?;
        let blob = blueprint("Blob", &[&k.data, &k.mime_type, &k.display_name])?;
        let file_data = blueprint("FileData", &[&k.file_uri, &k.mime_type, &k.display_name])?;
        let executable_code = blueprint("ExecutableCode", &[&k.code, &k.language, &k.id])?;
        let code_execution_result =
            blueprint("CodeExecutionResult", &[&k.outcome, &k.output, &k.id])?;
        let session_fields = [
            &k.id,
            &k.app_name,
            &k.user_id,
            &k.state,
            &k.events,
            &k.last_update_time,
        ];
        let session = blueprint("Session", &session_fields)?;
        check_session(py, &session, &k, &session_fields, blueprints)?;
        let (usage_model, grounding_model, citation_model) = metadata_models;
        Ok(Builder {
            builders: Builders {
                keys: k,
                event,
                actions,
                content,
                part,
                function_call,
                function_response,
                blob,
                file_data,
                executable_code,
                code_execution_result,
                session,
                from_json,
                model_from_json,
                usage_model,
                grounding_model,
                citation_model,
                finish_reasons,
                languages,
                outcomes,
                billion: 1_000_000_000_i64.into_pyobject(py)?.into_any().unbind(),
            },
        })
    }

    /// The Session a GetSession reply (an encoded `adk.session.v1.Session`) holds, with
    /// `event_fallback(index)` building the events declined here. None when the client must
    /// build it itself: the reply's events continue past it (a byte-bounded read), or the
    /// session was declined.
    fn session<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        event_fallback: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let message = pb::Session::decode(data)
            .map_err(|e| PyValueError::new_err(format!("not an adk.session.v1.Session: {e}")))?;
        if let Some(last) = message.events.last() {
            if last.sequence < message.last_sequence {
                return Ok(None);
            }
        }
        Ok(self
            .builders
            .session(py, &message, Some(event_fallback))?
            .ok())
    }

    /// The sessions of a ListSessions reply (an encoded `adk.session.v1.ListSessionsResponse`)
    /// and its next page token, with `session_fallback(index)` building the sessions declined
    /// here.
    fn sessions<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        session_fallback: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyList>, String)> {
        let reply = pb::ListSessionsResponse::decode(data).map_err(|e| {
            PyValueError::new_err(format!("not an adk.session.v1.ListSessionsResponse: {e}"))
        })?;
        let sessions = PyList::empty(py);
        for (index, message) in reply.sessions.iter().enumerate() {
            match self.builders.session(py, message, None)? {
                Ok(session) => sessions.append(session)?,
                Err(_) => sessions.append(session_fallback.call1((index,))?)?,
            }
        }
        Ok((sessions, reply.next_page_token))
    }
}

/// A Session is built with every field given (`build_all`): its fields must be exactly these,
/// in this order, and its private attributes exactly the storage marker.
fn check_session(
    py: Python<'_>,
    session: &Blueprint,
    k: &Keys,
    fields: &[&Py<PyString>],
    blueprints: &Bound<'_, PyDict>,
) -> PyResult<()> {
    let spec = blueprints
        .get_item("Session")?
        .ok_or_else(|| PyValueError::new_err("no blueprint for Session"))?;
    let names: Vec<String> = spec.getattr("names")?.extract()?;
    let expected: Vec<String> = fields.iter().map(|key| key.bind(py).to_string()).collect();
    let private = session.private_names(py)?;
    let marker_only = match private {
        Some(names) => names.len() == 1 && names.contains(k._storage_update_marker.bind(py))?,
        None => false,
    };
    if names != expected || !marker_only {
        return Err(PyValueError::new_err(
            "Session: its fields or private attributes are not the ones this module fills",
        ));
    }
    Ok(())
}

#[pymodule]
fn adk_grpc_services_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Builder>()
}
