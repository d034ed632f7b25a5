"""Reading a question and a turn: the vocabulary the rules are written with
(`memroute.reading.vocabulary`)."""
