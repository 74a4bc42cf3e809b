package agency

import "time"

// SetSurveyTimeout sets the bound of a Survey whose context has no
// deadline, until the returned function restores it. Tests that change it
// must not run in parallel.
func SetSurveyTimeout(d time.Duration) (restore func()) {
	old := surveyTimeout
	surveyTimeout = d
	return func() { surveyTimeout = old }
}
