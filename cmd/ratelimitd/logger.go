package main

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLoggers returns the logger at LOG_LEVEL and one that also logs at info,
// for the few startup lines an operator needs even at the default WARN.
func newLoggers(set settings, w io.Writer) (log, announce *zap.Logger) {
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	if set.LogJSON {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	ws := zapcore.Lock(zapcore.AddSync(w))
	log = zap.New(zapcore.NewCore(enc, ws, set.LogLevel))
	announce = zap.New(zapcore.NewCore(enc, ws, min(set.LogLevel, zapcore.InfoLevel)))
	return log, announce
}
