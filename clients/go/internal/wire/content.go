package wire

import (
	"fmt"
	"reflect"

	"google.golang.org/genai"

	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// ContentToProto is the message for a genai Content (nil for nil).
func ContentToProto(c *genai.Content) (*sessionpb.Content, error) {
	if c == nil {
		return nil, nil
	}
	m := &sessionpb.Content{Role: optString(c.Role), Parts: make([]*sessionpb.Part, 0, len(c.Parts))}
	for i, p := range c.Parts {
		if p == nil {
			return nil, fmt.Errorf("Content.parts[%d] is nil", i)
		}
		part, err := partToProto(p)
		if err != nil {
			return nil, fmt.Errorf("Content.parts[%d].%w", i, err)
		}
		m.Parts = append(m.Parts, part)
	}
	return m, nil
}

// ContentFromProto is the genai Content a message holds (nil for nil).
func ContentFromProto(m *sessionpb.Content) (*genai.Content, error) {
	if m == nil {
		return nil, nil
	}
	c := &genai.Content{Role: m.GetRole()}
	if len(m.Parts) > 0 {
		c.Parts = make([]*genai.Part, 0, len(m.Parts))
	}
	for i, pm := range m.Parts {
		p, err := partFromProto(pm)
		if err != nil {
			return nil, fmt.Errorf("Content.parts[%d].%w", i, err)
		}
		c.Parts = append(c.Parts, p)
	}
	return c, nil
}

// partToProto fills the message's one data field with the Part's first one (in the order
// text, inline data, file data, function call, function response, code, code result), as
// the other clients do; a second one, and fields the message does not name, go to extra.
func partToProto(p *genai.Part) (*sessionpb.Part, error) {
	m := &sessionpb.Part{Thought: optBool(p.Thought), ThoughtSignature: p.ThoughtSignature}
	rest := *p
	rest.Thought, rest.ThoughtSignature = false, nil
	var err error
	switch {
	case p.Text != "":
		m.Data = &sessionpb.Part_Text{Text: p.Text}
		rest.Text = ""
	case p.InlineData != nil:
		m.Data = &sessionpb.Part_InlineData{InlineData: &sessionpb.Blob{
			Data: p.InlineData.Data, MimeType: optString(p.InlineData.MIMEType),
			DisplayName: optString(p.InlineData.DisplayName)}}
		rest.InlineData = nil
	case p.FileData != nil:
		m.Data = &sessionpb.Part_FileData{FileData: &sessionpb.FileData{
			FileUri: optString(p.FileData.FileURI), MimeType: optString(p.FileData.MIMEType),
			DisplayName: optString(p.FileData.DisplayName)}}
		rest.FileData = nil
	case p.FunctionCall != nil:
		call, err := functionCallToProto(p.FunctionCall)
		if err != nil {
			return nil, err
		}
		m.Data = &sessionpb.Part_FunctionCall{FunctionCall: call}
		rest.FunctionCall = nil
	case p.FunctionResponse != nil:
		response, err := functionResponseToProto(p.FunctionResponse)
		if err != nil {
			return nil, err
		}
		m.Data = &sessionpb.Part_FunctionResponse{FunctionResponse: response}
		rest.FunctionResponse = nil
	case p.ExecutableCode != nil:
		m.Data = &sessionpb.Part_ExecutableCode{ExecutableCode: &sessionpb.ExecutableCode{
			Code: optString(p.ExecutableCode.Code), Language: optString(string(p.ExecutableCode.Language)),
			Id: optString(p.ExecutableCode.ID)}}
		rest.ExecutableCode = nil
	case p.CodeExecutionResult != nil:
		m.Data = &sessionpb.Part_CodeExecutionResult{CodeExecutionResult: &sessionpb.CodeExecutionResult{
			Outcome: optString(string(p.CodeExecutionResult.Outcome)), Output: optString(p.CodeExecutionResult.Output),
			Id: optString(p.CodeExecutionResult.ID)}}
		rest.CodeExecutionResult = nil
	}
	if !reflect.ValueOf(rest).IsZero() {
		if m.Extra, err = snakeJSON("extra", &rest); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func partFromProto(m *sessionpb.Part) (*genai.Part, error) {
	p := &genai.Part{Thought: m.GetThought(), ThoughtSignature: m.GetThoughtSignature()}
	switch d := m.Data.(type) {
	case *sessionpb.Part_Text:
		p.Text = d.Text
	case *sessionpb.Part_InlineData:
		p.InlineData = &genai.Blob{Data: d.InlineData.GetData(), MIMEType: d.InlineData.GetMimeType(),
			DisplayName: d.InlineData.GetDisplayName()}
	case *sessionpb.Part_FileData:
		p.FileData = &genai.FileData{FileURI: d.FileData.GetFileUri(), MIMEType: d.FileData.GetMimeType(),
			DisplayName: d.FileData.GetDisplayName()}
	case *sessionpb.Part_FunctionCall:
		call, err := functionCallFromProto(d.FunctionCall)
		if err != nil {
			return nil, err
		}
		p.FunctionCall = call
	case *sessionpb.Part_FunctionResponse:
		response, err := functionResponseFromProto(d.FunctionResponse)
		if err != nil {
			return nil, err
		}
		p.FunctionResponse = response
	case *sessionpb.Part_ExecutableCode:
		p.ExecutableCode = &genai.ExecutableCode{Code: d.ExecutableCode.GetCode(),
			Language: genai.Language(d.ExecutableCode.GetLanguage()), ID: d.ExecutableCode.GetId()}
	case *sessionpb.Part_CodeExecutionResult:
		p.CodeExecutionResult = &genai.CodeExecutionResult{Outcome: genai.Outcome(d.CodeExecutionResult.GetOutcome()),
			Output: d.CodeExecutionResult.GetOutput(), ID: d.CodeExecutionResult.GetId()}
	}
	if m.Extra != "" {
		if err := readExtra("extra", m.Extra, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func functionCallToProto(c *genai.FunctionCall) (*sessionpb.FunctionCall, error) {
	m := &sessionpb.FunctionCall{Id: optString(c.ID), Name: optString(c.Name), WillContinue: c.WillContinue}
	var err error
	if m.Args, err = marshalObject("function_call.args", c.Args); err != nil {
		return nil, err
	}
	rest := *c
	rest.ID, rest.Name, rest.Args, rest.WillContinue = "", "", nil, nil
	if !reflect.ValueOf(rest).IsZero() {
		if m.Extra, err = snakeJSON("function_call.extra", &rest); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func functionCallFromProto(m *sessionpb.FunctionCall) (*genai.FunctionCall, error) {
	c := &genai.FunctionCall{ID: m.GetId(), Name: m.GetName(), WillContinue: m.WillContinue}
	var err error
	if c.Args, err = unmarshalObject("function_call.args", m.Args); err != nil {
		return nil, err
	}
	if m.Extra != "" {
		if err := readExtra("function_call.extra", m.Extra, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func functionResponseToProto(r *genai.FunctionResponse) (*sessionpb.FunctionResponse, error) {
	m := &sessionpb.FunctionResponse{Id: optString(r.ID), Name: optString(r.Name), WillContinue: r.WillContinue}
	var err error
	if m.Response, err = marshalObject("function_response.response", r.Response); err != nil {
		return nil, err
	}
	rest := *r
	rest.ID, rest.Name, rest.Response, rest.WillContinue = "", "", nil, nil
	if !reflect.ValueOf(rest).IsZero() {
		if m.Extra, err = snakeJSON("function_response.extra", &rest); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func functionResponseFromProto(m *sessionpb.FunctionResponse) (*genai.FunctionResponse, error) {
	r := &genai.FunctionResponse{ID: m.GetId(), Name: m.GetName(), WillContinue: m.WillContinue}
	var err error
	if r.Response, err = unmarshalObject("function_response.response", m.Response); err != nil {
		return nil, err
	}
	if m.Extra != "" {
		if err := readExtra("function_response.extra", m.Extra, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}
