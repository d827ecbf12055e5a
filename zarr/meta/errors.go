package meta

import (
	"errors"
	"fmt"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// Error classes; every error from this package matches one of them.
var (
	// ErrInvalid: the document breaks the Zarr specification.
	ErrInvalid = errors.New("invalid metadata")
	// ErrUnsupported: the document is valid but needs a feature zarrfs
	// does not implement (an unknown data type, chunk grid, storage
	// transformer or required extension field).
	ErrUnsupported = errors.New("unsupported metadata")
)

// Names of the documents, used in error messages.
const (
	docV3           = "zarr.json"
	docZarray       = ".zarray"
	docZgroup       = ".zgroup"
	docZattrs       = ".zattrs"
	docConsolidated = ".zmetadata"
)

// metaError is a classified error. Its message is "doc: field: reason";
// errors.Is matches both the class and the cause.
type metaError struct {
	doc   string
	class error
	err   error
}

func (e *metaError) Error() string {
	if e.doc == "" {
		return e.err.Error()
	}
	return e.doc + ": " + e.err.Error()
}

func (e *metaError) Unwrap() []error { return []error{e.class, e.err} }

// invalid returns an ErrInvalid error; the message should start with the field.
func invalid(format string, args ...any) error {
	return &metaError{class: ErrInvalid, err: fmt.Errorf(format, args...)}
}

// unsupported returns an ErrUnsupported error; the message should start with the field.
func unsupported(format string, args ...any) error {
	return &metaError{class: ErrUnsupported, err: fmt.Errorf(format, args...)}
}

// fromDtype classifies an error of package dtype, whose messages already
// name their field: unknown data types are unsupported, the rest invalid.
func fromDtype(err error) error {
	if errors.Is(err, dtype.ErrUnknown) {
		return &metaError{class: ErrUnsupported, err: err}
	}
	return &metaError{class: ErrInvalid, err: err}
}

// inDoc names the document an error was found in; unclassified errors are
// invalid.
func inDoc(doc string, err error) error {
	if err == nil {
		return nil
	}
	if me, ok := err.(*metaError); ok && me.doc == "" {
		return &metaError{doc: doc, class: me.class, err: me.err}
	}
	return &metaError{doc: doc, class: ErrInvalid, err: err}
}
