//go:build cgo

package zarena

import (
	"context"
	"log/slog"
	"strings"
)

// SlogLevel maps a zarena level to slog's: trace is slog.LevelDebug-4, the others match
// by name.
func (l Level) SlogLevel() slog.Level {
	switch l {
	case LevelTrace:
		return slog.LevelDebug - 4
	case LevelDebug:
		return slog.LevelDebug
	case LevelInfo:
		return slog.LevelInfo
	case LevelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Attrs are the record's typed fields as slog attributes, after "event", "arena" and
// "arena_id" (Record.ArenaID, for a handler that routes records to their pool): uint64
// fields stay Uint64, strings String, and so on.
func (r Record) Attrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, len(r.Fields)+3)
	attrs = append(attrs, slog.String("event", r.Event))
	if r.Arena != "" {
		attrs = append(attrs, slog.String("arena", r.Arena))
	}
	if r.ArenaID != 0 {
		attrs = append(attrs, slog.Uint64("arena_id", r.ArenaID))
	}
	for _, f := range r.Fields {
		switch v := f.Value.(type) {
		case int64:
			attrs = append(attrs, slog.Int64(f.Key, v))
		case uint64:
			attrs = append(attrs, slog.Uint64(f.Key, v))
		case float64:
			attrs = append(attrs, slog.Float64(f.Key, v))
		case bool:
			attrs = append(attrs, slog.Bool(f.Key, v))
		case string:
			attrs = append(attrs, slog.String(f.Key, v))
		default:
			attrs = append(attrs, slog.Any(f.Key, v))
		}
	}
	return attrs
}

// SlogLogger adapts h for SetLogger: SetLogger(SlogLogger(h)). The function hands each
// record to h as an slog.Record (the message, the mapped level, the attributes of
// Record.Attrs less the settings left at their defaults: a field X whose companion
// X_source is "default", as arena.config lists every setting, is left out with its
// source, so a New logs what was set rather than ~60 attributes; a plain SetLogger's
// Record keeps every field); the level is the lowest zarena level h is enabled for, so
// records h would drop are not even built.
func SlogLogger(h slog.Handler) (func(Record), Level) {
	ctx := context.Background()
	lowest := LevelOff
	for l := LevelTrace; l < LevelOff; l++ {
		if h.Enabled(ctx, l.SlogLevel()) {
			lowest = l
			break
		}
	}
	return func(r Record) {
		lvl := r.Level.SlogLevel()
		if !h.Enabled(ctx, lvl) {
			return
		}
		sr := slog.NewRecord(r.Time, lvl, r.Message, 0)
		sr.AddAttrs(withoutDefaults(r.Attrs())...)
		_ = h.Handle(ctx, sr)
	}, lowest
}

// withoutDefaults drops the attributes X and X_source where X_source is "default".
func withoutDefaults(attrs []slog.Attr) []slog.Attr {
	const suffix = "_source"
	defaults := map[string]bool{}
	for _, a := range attrs {
		if strings.HasSuffix(a.Key, suffix) && a.Value.Kind() == slog.KindString &&
			a.Value.String() == "default" {
			defaults[strings.TrimSuffix(a.Key, suffix)] = true
		}
	}
	if len(defaults) == 0 {
		return attrs
	}
	kept := attrs[:0:0]
	for _, a := range attrs {
		base := strings.TrimSuffix(a.Key, suffix)
		if defaults[a.Key] || (base != a.Key && defaults[base]) {
			continue
		}
		kept = append(kept, a)
	}
	return kept
}
