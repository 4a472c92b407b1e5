package grpcmemory

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/pb/memorypb"
)

// Filter says which memories a search, a listing or a purge considers; every part given must
// hold. The zero value keeps every memory.
type Filter struct {
	// AnyOf holds conditions on custom_metadata keys as an OR of AND groups: a memory passes
	// when every condition of at least one group holds.
	//
	//	grpcmemory.Filter{AnyOf: [][]grpcmemory.Condition{
	//		{grpcmemory.Eq("color", "red"), grpcmemory.Ge("n", 10)},
	//		{grpcmemory.Exists("vip")},
	//	}}
	AnyOf [][]Condition
	// Topics keeps memories of one of these topics (a generated memory's "topic" key, or any
	// "topic" string a caller stored); empty: any.
	Topics []string
}

// Condition is a condition on one top-level key of a memory's custom_metadata, made by [Eq],
// [Ne], [Lt], [Le], [Gt], [Ge] or [Exists]. A key that is absent, or holds a value of another
// type than the condition's, fails every condition but [Ne].
type Condition struct {
	key   string
	op    memorypb.MetadataOperator
	value any // nil, string, float64, bool or time.Time
}

// Value is what a condition compares a key's value with: a JSON string, number or bool, or a
// time (compared with a JSON string holding an RFC 3339 time).
type Value interface {
	string | bool | int | int64 | float64 | time.Time
}

// Ordered is what the ordering conditions compare: numbers and times.
type Ordered interface {
	int | int64 | float64 | time.Time
}

// Eq holds when the key's value equals v.
func Eq[V Value](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_EQUAL, v)
}

// Ne holds when the key is absent or its value is not v.
func Ne[V Value](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_NOT_EQUAL, v)
}

// Lt holds when the key's value is below v.
func Lt[V Ordered](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_LESS, v)
}

// Le holds when the key's value is at most v.
func Le[V Ordered](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_LESS_OR_EQUAL, v)
}

// Gt holds when the key's value is above v.
func Gt[V Ordered](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_GREATER, v)
}

// Ge holds when the key's value is at least v.
func Ge[V Ordered](key string, v V) Condition {
	return condition(key, memorypb.MetadataOperator_METADATA_OPERATOR_GREATER_OR_EQUAL, v)
}

// Exists holds when the key is present, whatever its value.
func Exists(key string) Condition {
	return Condition{key: key, op: memorypb.MetadataOperator_METADATA_OPERATOR_EXISTS}
}

func condition(key string, op memorypb.MetadataOperator, v any) Condition {
	// Integers travel as the JSON numbers they are compared with.
	switch n := v.(type) {
	case int:
		v = float64(n)
	case int64:
		v = float64(n)
	}
	return Condition{key: key, op: op, value: v}
}

// toProto is the filter on the wire, nil when it holds nothing. A condition the server could
// only misread (the zero Condition, a number that is not finite) is refused here; every other
// limit is the server's to judge.
func (f *Filter) toProto() (*memorypb.MemoryFilter, error) {
	if len(f.AnyOf) == 0 && len(f.Topics) == 0 {
		return nil, nil
	}
	out := &memorypb.MemoryFilter{Topics: f.Topics}
	for i, group := range f.AnyOf {
		conditions := &memorypb.MetadataConditions{}
		for j, c := range group {
			m, err := c.toProto()
			if err != nil {
				return nil, fmt.Errorf("grpcmemory: filter.any_of[%d].all_of[%d]: %w: %w", i, j, adkgrpc.ErrInvalidArgument, err)
			}
			conditions.AllOf = append(conditions.AllOf, m)
		}
		out.AnyOf = append(out.AnyOf, conditions)
	}
	return out, nil
}

func (c Condition) toProto() (*memorypb.MetadataCondition, error) {
	m := &memorypb.MetadataCondition{Key: c.key, Operator: c.op}
	switch v := c.value.(type) {
	case nil:
		if c.op != memorypb.MetadataOperator_METADATA_OPERATOR_EXISTS {
			return nil, fmt.Errorf("no operator and value: make conditions with Eq, Ne, Lt, Le, Gt, Ge or Exists")
		}
	case string:
		m.Value = &memorypb.MetadataCondition_StringValue{StringValue: v}
	case bool:
		m.Value = &memorypb.MetadataCondition_BoolValue{BoolValue: v}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: the number %v is not finite", c.key, v)
		}
		m.Value = &memorypb.MetadataCondition_NumberValue{NumberValue: v}
	case time.Time:
		m.Value = &memorypb.MetadataCondition_TimeValue{TimeValue: timestamppb.New(v)}
	}
	return m, nil
}
