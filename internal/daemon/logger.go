package daemon

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLoggers returns the logger at LOG_LEVEL and one that also logs at info,
// for the few startup lines an operator needs even at the default WARN
// (not at ERROR).
// Both encode through the settings' redactor, so no line shows a secret,
// whoever logs it.
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
	enc = set.redactor().Encoder(enc)
	ws := zapcore.Lock(zapcore.AddSync(w))
	log = zap.New(zapcore.NewCore(enc, ws, set.LogLevel))
	// LOG_LEVEL=error silences them too: errors only.
	announceLevel := min(set.LogLevel, zapcore.InfoLevel)
	if set.LogLevel >= zapcore.ErrorLevel {
		announceLevel = set.LogLevel
	}
	announce = zap.New(zapcore.NewCore(enc, ws, announceLevel))
	return log, announce
}
