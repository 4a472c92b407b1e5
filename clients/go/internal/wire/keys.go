package wire

import (
	"encoding/json"
	"fmt"
)

// The genai values in JSON text fields (usage, grounding and citation metadata) hold no
// free-form values, so their keys are renamed in the text itself, in one pass: most model
// responses carry usage metadata, and building a tree for it cost most of reading an event.

// metadataJSON is the JSON text of a genai metadata value with snake_case keys ("" for an
// empty one).
func metadataJSON(field string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	if string(raw) == "{}" || string(raw) == "null" {
		return "", nil
	}
	return string(renameJSONKeys(raw, snakeKey)), nil
}

// fromMetadataJSON reads snake_case JSON text into a genai metadata value.
func fromMetadataJSON(field, text string, v any) error {
	if err := json.Unmarshal(renameJSONKeys([]byte(text), camelKey), v); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// renameJSONKeys rewrites every object key of a JSON text with rename, leaving string values
// and everything else as they are. The text must be valid JSON (it is checked when decoded).
func renameJSONKeys(data []byte, rename func(dst, key []byte) []byte) []byte {
	out := make([]byte, 0, len(data)+len(data)/8)
	for i := 0; i < len(data); {
		c := data[i]
		if c != '"' {
			out = append(out, c)
			i++
			continue
		}
		end := i + 1
		for end < len(data) && data[end] != '"' {
			if data[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(data) {
			return append(out, data[i:]...)
		}
		next := end + 1
		for next < len(data) && (data[next] == ' ' || data[next] == '\t' || data[next] == '\n' || data[next] == '\r') {
			next++
		}
		if next < len(data) && data[next] == ':' {
			out = append(out, '"')
			out = rename(out, data[i+1:end])
			out = append(out, '"')
		} else {
			out = append(out, data[i:end+1]...)
		}
		i = end + 1
	}
	return out
}

// snakeKey: promptTokenCount -> prompt_token_count.
func snakeKey(dst, key []byte) []byte {
	for i, c := range key {
		if 'A' <= c && c <= 'Z' {
			if i > 0 {
				dst = append(dst, '_')
			}
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// camelKey: prompt_token_count -> promptTokenCount.
func camelKey(dst, key []byte) []byte {
	upper := false
	for _, c := range key {
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			dst = append(dst, c-('a'-'A'))
			upper = false
		default:
			dst = append(dst, c)
			upper = false
		}
	}
	return dst
}
