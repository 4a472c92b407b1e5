//! ADK `Event`s (with their actions, content and parts) and `Session`s from decoded
//! `adk.session.v1` messages, field for field as the Python client's `_built_event`,
//! `_built_actions`, `_built_content`, `_built_part` and `_session` build them.
//!
//! Whatever those functions leave to validation (an `extra` anywhere, auth configs, tool
//! confirmations, compaction, an enum text that names no member) is declined here too, and so is
//! an artifact delta (a protobuf map, whose order the client's decoder keeps and this one would
//! not). A declined value is built by the client's path, so the result is always the one that
//! path gives.

use adk_proto::session::v1 as pb;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySet, PyString};

use crate::models::{Blueprint, Decline, Keys, Values};

/// Everything building takes: the blueprints, and the client's helpers for the values it
/// decodes itself (JSON objects, genai models held as JSON, enum members).
pub struct Builders {
    pub keys: Keys,
    pub event: Blueprint,
    pub actions: Blueprint,
    pub content: Blueprint,
    pub part: Blueprint,
    pub function_call: Blueprint,
    pub function_response: Blueprint,
    pub blob: Blueprint,
    pub file_data: Blueprint,
    pub executable_code: Blueprint,
    pub code_execution_result: Blueprint,
    pub session: Blueprint,
    /// pydantic-core's `from_json`, which the client's `loads_object` reads JSON objects with.
    pub from_json: Py<PyAny>,
    /// `mapping._model_from_json(model, text)`, and the models of the three metadata fields.
    pub model_from_json: Py<PyAny>,
    pub usage_model: Py<PyAny>,
    pub grounding_model: Py<PyAny>,
    pub citation_model: Py<PyAny>,
    /// Enum value -> member maps (`_value2member_map_`, held live).
    pub finish_reasons: Py<PyDict>,
    pub languages: Py<PyDict>,
    pub outcomes: Py<PyDict>,
    /// Nanoseconds per second, as a Python int.
    pub billion: Py<PyAny>,
}

type Built<'py> = Result<Bound<'py, PyAny>, Decline>;

impl Builders {
    /// The ADK Session a message holds. `event_fallback(index)` builds an event declined here;
    /// without it (listings), such an event declines the session.
    pub fn session<'py>(
        &self,
        py: Python<'py>,
        message: &pb::Session,
        event_fallback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Result<Bound<'py, PyAny>, Decline>> {
        let k = &self.keys;
        let state = match self.json_object(py, &message.state) {
            Ok(state) => state,
            Err(decline) => return Ok(Err(decline)),
        };
        let events = PyList::empty(py);
        for (index, event) in message.events.iter().enumerate() {
            match (self.event(py, event), event_fallback) {
                (Ok(built), _) => events.append(built)?,
                (Err(Decline), Some(fallback)) => events.append(fallback.call1((index,))?)?,
                (Err(decline), None) => return Ok(Err(decline)),
            }
        }
        // last_update_time is the last event's timestamp (S6.8); when that event is here, its
        // exact float is known even where a nanosecond Timestamp cannot hold it.
        let last_here = message.events.last().map(|event| event.sequence);
        let last_update_time =
            if last_here == Some(message.last_sequence) && message.last_sequence > 0 {
                events
                    .get_item(events.len() - 1)?
                    .getattr(k.timestamp.bind(py))?
            } else {
                self.seconds(py, message.last_update_time.unwrap_or_default())?
            };
        let fields = PyDict::new(py);
        fields.set_item(k.id.bind(py), &message.id)?;
        fields.set_item(k.app_name.bind(py), &message.app_name)?;
        fields.set_item(k.user_id.bind(py), &message.user_id)?;
        fields.set_item(k.state.bind(py), state)?;
        fields.set_item(k.events.bind(py), events)?;
        fields.set_item(k.last_update_time.bind(py), last_update_time)?;
        let private = PyDict::new(py);
        private.set_item(
            k._storage_update_marker.bind(py),
            format!("seq:{}", message.last_sequence),
        )?;
        Ok(Ok(self.session.build_all(py, k, fields, private)?))
    }

    fn event<'py>(&self, py: Python<'py>, message: &pb::Event) -> Built<'py> {
        if message.id.is_empty() || !message.extra.is_empty() {
            return Err(Decline);
        }
        let k = &self.keys;
        let mut values: Values<'_, 'py> = Vec::with_capacity(12);
        values.push((&k.id, text(py, &message.id)));
        values.push((&k.invocation_id, text(py, &message.invocation_id)));
        values.push((&k.author, text(py, &message.author)));
        if let Some(content) = &message.content {
            values.push((&k.content, self.content(py, content)?));
        }
        if let Some(actions) = &message.actions {
            values.push((&k.actions, self.actions(py, actions)?));
        }
        optional_text(py, &mut values, &k.branch, &message.branch);
        if let Some(timestamp) = message.timestamp {
            values.push((&k.timestamp, self.seconds(py, timestamp)?));
        }
        optional_bool(py, &mut values, &k.partial, message.partial);
        optional_bool(py, &mut values, &k.turn_complete, message.turn_complete);
        optional_text(py, &mut values, &k.error_code, &message.error_code);
        optional_text(py, &mut values, &k.error_message, &message.error_message);
        optional_bool(py, &mut values, &k.interrupted, message.interrupted);
        if !message.long_running_tool_ids.is_empty() {
            let ids = PySet::new(py, &message.long_running_tool_ids)?;
            values.push((&k.long_running_tool_ids, ids.into_any()));
        }
        if !message.custom_metadata.is_empty() {
            let metadata = self.json_object(py, &message.custom_metadata)?;
            values.push((&k.custom_metadata, metadata));
        }
        let models = [
            (
                &k.usage_metadata,
                &message.usage_metadata,
                &self.usage_model,
            ),
            (
                &k.grounding_metadata,
                &message.grounding_metadata,
                &self.grounding_model,
            ),
            (
                &k.citation_metadata,
                &message.citation_metadata,
                &self.citation_model,
            ),
        ];
        for (key, json, model) in models {
            if !json.is_empty() {
                values.push((key, self.model_from_json.bind(py).call1((model, json))?));
            }
        }
        optional_text(py, &mut values, &k.model_version, &message.model_version);
        if let Some(reason) = &message.finish_reason {
            values.push((&k.finish_reason, member(&self.finish_reasons, py, reason)?));
        }
        Ok(self.event.build(py, k, &values)?)
    }

    fn actions<'py>(&self, py: Python<'py>, message: &pb::EventActions) -> Built<'py> {
        if !message.extra.is_empty()
            || !message.requested_auth_configs.is_empty()
            || !message.requested_tool_confirmations.is_empty()
            || message.compaction.is_some()
            || !message.artifact_delta.is_empty()
        {
            return Err(Decline);
        }
        let k = &self.keys;
        let state_delta = self.json_object(py, &message.state_delta)?;
        let mut values: Values<'_, 'py> = vec![
            (&k.state_delta, state_delta),
            (&k.requested_auth_configs, PyDict::new(py).into_any()),
            (&k.requested_tool_confirmations, PyDict::new(py).into_any()),
            (&k.artifact_delta, PyDict::new(py).into_any()),
        ];
        optional_bool(
            py,
            &mut values,
            &k.skip_summarization,
            message.skip_summarization,
        );
        optional_text(
            py,
            &mut values,
            &k.transfer_to_agent,
            &message.transfer_to_agent,
        );
        optional_text(
            py,
            &mut values,
            &k.transfer_reason,
            &message.transfer_reason,
        );
        optional_bool(py, &mut values, &k.escalate, message.escalate);
        optional_bool(py, &mut values, &k.end_of_agent, message.end_of_agent);
        if !message.agent_state.is_empty() {
            let state = self.json_object(py, &message.agent_state)?;
            values.push((&k.agent_state, state));
        }
        optional_text(
            py,
            &mut values,
            &k.rewind_before_invocation_id,
            &message.rewind_before_invocation_id,
        );
        Ok(self.actions.build(py, k, &values)?)
    }

    fn content<'py>(&self, py: Python<'py>, message: &pb::Content) -> Built<'py> {
        let k = &self.keys;
        let mut values: Values<'_, 'py> = Vec::with_capacity(2);
        optional_text(py, &mut values, &k.role, &message.role);
        if !message.parts.is_empty() {
            let parts = PyList::empty(py);
            for part in &message.parts {
                parts.append(self.part(py, part)?)?;
            }
            values.push((&k.parts, parts.into_any()));
        }
        Ok(self.content.build(py, k, &values)?)
    }

    fn part<'py>(&self, py: Python<'py>, message: &pb::Part) -> Built<'py> {
        use pb::part::Data;
        if !message.extra.is_empty() {
            return Err(Decline);
        }
        let k = &self.keys;
        let mut values: Values<'_, 'py> = Vec::with_capacity(2);
        match &message.data {
            Some(Data::Text(t)) => values.push((&k.text, text(py, t))),
            Some(Data::FunctionCall(call)) => {
                let payload = (&k.args, call.args.as_str());
                let parts = (
                    &call.id,
                    &call.name,
                    call.will_continue,
                    call.extra.as_str(),
                );
                let built = self.call(py, &self.function_call, parts, payload)?;
                values.push((&k.function_call, built));
            }
            Some(Data::FunctionResponse(reply)) => {
                let payload = (&k.response, reply.response.as_str());
                let parts = (
                    &reply.id,
                    &reply.name,
                    reply.will_continue,
                    reply.extra.as_str(),
                );
                let built = self.call(py, &self.function_response, parts, payload)?;
                values.push((&k.function_response, built));
            }
            Some(Data::InlineData(blob)) => {
                let mut blob_values: Values<'_, 'py> = Vec::with_capacity(3);
                if let Some(data) = &blob.data {
                    blob_values.push((&k.data, PyBytes::new(py, data).into_any()));
                }
                optional_text(py, &mut blob_values, &k.mime_type, &blob.mime_type);
                optional_text(py, &mut blob_values, &k.display_name, &blob.display_name);
                values.push((&k.inline_data, self.blob.build(py, k, &blob_values)?));
            }
            Some(Data::FileData(file)) => {
                let mut file_values: Values<'_, 'py> = Vec::with_capacity(3);
                optional_text(py, &mut file_values, &k.file_uri, &file.file_uri);
                optional_text(py, &mut file_values, &k.mime_type, &file.mime_type);
                optional_text(py, &mut file_values, &k.display_name, &file.display_name);
                values.push((&k.file_data, self.file_data.build(py, k, &file_values)?));
            }
            Some(Data::ExecutableCode(code)) => {
                let mut code_values: Values<'_, 'py> = Vec::with_capacity(3);
                optional_text(py, &mut code_values, &k.code, &code.code);
                if let Some(language) = &code.language {
                    code_values.push((&k.language, member(&self.languages, py, language)?));
                }
                optional_text(py, &mut code_values, &k.id, &code.id);
                let built = self.executable_code.build(py, k, &code_values)?;
                values.push((&k.executable_code, built));
            }
            Some(Data::CodeExecutionResult(result)) => {
                let mut result_values: Values<'_, 'py> = Vec::with_capacity(3);
                if let Some(outcome) = &result.outcome {
                    result_values.push((&k.outcome, member(&self.outcomes, py, outcome)?));
                }
                optional_text(py, &mut result_values, &k.output, &result.output);
                optional_text(py, &mut result_values, &k.id, &result.id);
                let built = self.code_execution_result.build(py, k, &result_values)?;
                values.push((&k.code_execution_result, built));
            }
            None => {}
        }
        optional_bool(py, &mut values, &k.thought, message.thought);
        if let Some(signature) = &message.thought_signature {
            values.push((&k.thought_signature, PyBytes::new(py, signature).into_any()));
        }
        Ok(self.part.build(py, k, &values)?)
    }

    /// A FunctionCall or FunctionResponse: its id, name, will_continue and extra, and its JSON
    /// payload (args or response) under its key.
    fn call<'k, 'py>(
        &'k self,
        py: Python<'py>,
        blueprint: &Blueprint,
        (id, name, will_continue, extra): (&Option<String>, &Option<String>, Option<bool>, &str),
        (payload_key, payload): (&'k Py<PyString>, &str),
    ) -> Built<'py> {
        if !extra.is_empty() {
            return Err(Decline);
        }
        let k = &self.keys;
        let mut values: Values<'k, 'py> = Vec::with_capacity(4);
        optional_text(py, &mut values, &k.id, id);
        optional_text(py, &mut values, &k.name, name);
        optional_bool(py, &mut values, &k.will_continue, will_continue);
        if !payload.is_empty() {
            values.push((payload_key, self.json_object(py, payload)?));
        }
        Ok(blueprint.build(py, k, &values)?)
    }

    /// The client's `loads_object`: a JSON object text, the empty text read as `{}`. Anything
    /// else is declined, for the client's path to raise its error.
    fn json_object<'py>(&self, py: Python<'py>, json: &str) -> Built<'py> {
        if json.is_empty() {
            return Ok(PyDict::new(py).into_any());
        }
        let value = self.from_json.bind(py).call1((json,))?;
        if !value.is_instance_of::<PyDict>() {
            return Err(Decline);
        }
        Ok(value)
    }

    /// `timestamps.to_seconds`: whole nanoseconds divided by 10**9 as Python ints divide, so
    /// correctly rounded, as the client's own conversion.
    fn seconds<'py>(
        &self,
        py: Python<'py>,
        timestamp: prost_types::Timestamp,
    ) -> PyResult<Bound<'py, PyAny>> {
        let nanos = i128::from(timestamp.seconds) * 1_000_000_000 + i128::from(timestamp.nanos);
        // An i64 holds every time until 2262, and converts faster than an i128.
        let nanos = match i64::try_from(nanos) {
            Ok(nanos) => nanos.into_pyobject(py)?,
            Err(_) => nanos.into_pyobject(py)?,
        };
        nanos.div(self.billion.bind(py))
    }
}

fn text<'py>(py: Python<'py>, value: &str) -> Bound<'py, PyAny> {
    PyString::new(py, value).into_any()
}

fn optional_text<'k, 'py>(
    py: Python<'py>,
    values: &mut Values<'k, 'py>,
    key: &'k Py<PyString>,
    value: &Option<String>,
) {
    if let Some(value) = value {
        values.push((key, text(py, value)));
    }
}

fn optional_bool<'k, 'py>(
    py: Python<'py>,
    values: &mut Values<'k, 'py>,
    key: &'k Py<PyString>,
    value: Option<bool>,
) {
    if let Some(value) = value {
        values.push((
            key,
            pyo3::types::PyBool::new(py, value).to_owned().into_any(),
        ));
    }
}

/// The enum member whose value is `value`; an unknown text is declined, as the client's
/// `_member` leaves it to validation.
fn member<'py>(members: &Py<PyDict>, py: Python<'py>, value: &str) -> Built<'py> {
    members.bind(py).get_item(value)?.ok_or(Decline)
}
