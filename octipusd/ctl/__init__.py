"""octipusctl (`main`) and the API client it and other clients use (`client`)."""
