package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	gojson "github.com/goccy/go-json"
)

// freeForm names the fields whose values are the application's own JSON (tool arguments,
// state, metadata): their keys are data, never renamed between ADK Go's camelCase and the
// contract's snake_case.
var freeForm = map[string]bool{
	"args": true, "response": true, "custom_metadata": true, "part_metadata": true,
	"state_delta": true, "payload": true, "output": true, "response_schema": true,
	"agent_state": true,
}

// marshal writes compact JSON without HTML escaping, as the other clients do.
func marshal(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// marshalObject is the JSON text of a free-form object; nil (absent) is "".
func marshalObject(field string, m map[string]any) (string, error) {
	if m == nil {
		return "", nil
	}
	text, err := marshal(m)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return text, nil
}

// unmarshalObject reads a JSON-object text field; "" (absent) is nil. It decodes with
// goccy/go-json, which reads free-form JSON into the same values as encoding/json (numbers as
// float64, the last of duplicate keys, invalid UTF-8 as U+FFFD) in about half the time: every
// event of a session read carries such fields (its state delta at least).
func unmarshalObject(field, text string) (map[string]any, error) {
	if text == "" {
		return nil, nil
	}
	var m map[string]any
	if err := gojson.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("%s holds JSON that is not an object: %w", field, err)
	}
	return m, nil
}

// snakeJSON is the JSON text of a genai or ADK value with its keys in the contract's
// snake_case (the form ADK Python writes); "" when v encodes as null or {}.
func snakeJSON(field string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	if m, ok := tree.(map[string]any); tree == nil || ok && len(m) == 0 {
		return "", nil
	}
	return marshal(renameKeys(tree, toSnake))
}

func fromSnakeTree(field string, tree any, v any) error {
	raw, err := json.Marshal(renameKeys(tree, toCamel))
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// renameKeys renames the object keys of a decoded JSON tree, except inside free-form values.
func renameKeys(tree any, rename func(string) string) any {
	switch t := tree.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			name := rename(k)
			if freeForm[toSnake(k)] {
				out[name] = v
			} else {
				out[name] = renameKeys(v, rename)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = renameKeys(v, rename)
		}
		return out
	default:
		return tree
	}
}

// toSnake: "promptTokenCount" -> "prompt_token_count".
func toSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// toCamel: "prompt_token_count" -> "promptTokenCount".
func toCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	upper := false
	for _, r := range s {
		switch {
		case r == '_':
			upper = true
		case upper:
			b.WriteRune(unicode.ToUpper(r))
			upper = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// MarshalState is the JSON text of a state or a state delta.
func MarshalState(state map[string]any) (string, error) { return marshalObject("state", state) }

// UnmarshalState reads a state's JSON text ("" is an empty state).
func UnmarshalState(field, text string) (map[string]any, error) {
	return unmarshalObject(field, text)
}
